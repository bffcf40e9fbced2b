package espalier.peers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.RelationshipType;
import org.neo4j.graphdb.Result;
import org.neo4j.graphdb.Transaction;

/**
 * The Train Benchmark's six queries on Neo4j Community, embedded: the peer of {@code espalier
 * bench trainbenchmark --peers neo4j}. The same protocol as {@code peers/trainbenchmark.py}: one
 * JSON request on standard input ({@code system, dir, prefix, warmup, runs, queries: [{name,
 * cypher}]}), the model read from the official CSV files {@code dir/prefix-*.csv}, one JSON reply
 * on standard output ({@code system, version, load_ms, queries: [{name, times_us, matches}]}),
 * matches sorted. The graph is the one Kùzu gets: TrackElement nodes with a kind, relationships
 * named as the link files. Any failure: one line on standard error, exit status 1.
 */
public final class TrainBenchmark {
  private static final int BATCH = 50_000;

  private TrainBenchmark() {}

  public static void main(String[] args) {
    if (args.length == 1 && args[0].equals("--version")) {
      System.out.println("Neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion());
      return;
    }
    DriverMain.run(TrainBenchmark::run);
  }

  private static List<String[]> read(Path dir, String prefix, String name) throws IOException {
    List<String[]> rows = new ArrayList<>();
    try (BufferedReader r = Files.newBufferedReader(dir.resolve(prefix + "-" + name + ".csv"))) {
      String line = r.readLine(); // the header
      while ((line = r.readLine()) != null) {
        String[] fields = line.split(",", -1);
        for (int i = 0; i < fields.length; i++) {
          fields[i] = fields[i].replace("\"", "");
        }
        rows.add(fields);
      }
    }
    return rows;
  }

  private static void run() throws Exception {
    ObjectMapper json = new ObjectMapper();
    JsonNode request = json.readTree(System.in);
    Path dir = Path.of(request.get("dir").asText());
    String prefix = request.get("prefix").asText();
    int warmup = request.get("warmup").asInt();
    int runs = request.get("runs").asInt();

    DatabaseManagementService dbms = Dbms.builder(dir.resolve("neo4j-work")).build();
    try {
      GraphDatabaseService db = dbms.database("neo4j");
      // The load is timed once the database runs: starting the DBMS (seconds) is not loading.
      long started = System.nanoTime();
      load(db, dir, prefix);
      double loadMs = (System.nanoTime() - started) / 1e6;

      ObjectNode reply = json.createObjectNode();
      reply.put("system", "neo4j");
      reply.put("version", "Neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion());
      reply.put("load_ms", loadMs);
      ArrayNode out = reply.putArray("queries");
      for (JsonNode query : request.get("queries")) {
        String cypher = query.get("cypher").asText();
        ArrayNode times = json.createArrayNode();
        List<List<Long>> rows = new ArrayList<>();
        for (int i = 0; i < warmup + runs; i++) {
          long t = System.nanoTime();
          rows = execute(db, cypher);
          if (i >= warmup) {
            times.add((System.nanoTime() - t) / 1e3);
          }
        }
        rows.sort(TrainBenchmark::compare);
        ObjectNode q = out.addObject();
        q.put("name", query.get("name").asText());
        q.set("times_us", times);
        ArrayNode matches = q.putArray("matches");
        for (List<Long> row : rows) {
          ArrayNode r = matches.addArray();
          row.forEach(r::add);
        }
      }
      json.writeValue(System.out, reply);
    } finally {
      dbms.shutdown();
    }
  }

  private static int compare(List<Long> a, List<Long> b) {
    for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
      int c = Long.compare(a.get(i), b.get(i));
      if (c != 0) {
        return c;
      }
    }
    return Integer.compare(a.size(), b.size());
  }

  private static List<List<Long>> execute(GraphDatabaseService db, String cypher) {
    List<List<Long>> rows = new ArrayList<>();
    try (Transaction tx = db.beginTx(); Result result = tx.execute(cypher)) {
      List<String> columns = result.columns();
      while (result.hasNext()) {
        Map<String, Object> row = result.next();
        List<Long> ids = new ArrayList<>(columns.size());
        for (String c : columns) {
          ids.add(((Number) row.get(c)).longValue());
        }
        rows.add(ids);
      }
      tx.commit();
    }
    return rows;
  }

  /** Nodes by label with their properties, then the relationships, in batches of BATCH. */
  private static void load(GraphDatabaseService db, Path dir, String prefix) throws IOException {
    Map<Long, String> byId = new HashMap<>();
    List<Object[]> nodes = new ArrayList<>(); // label, id, property names and values
    for (String[] r : read(dir, prefix, "Region")) {
      nodes.add(new Object[] {"Region", Long.parseLong(r[0])});
    }
    for (String[] r : read(dir, prefix, "Route")) {
      nodes.add(new Object[] {"Route", Long.parseLong(r[0]), "active", Boolean.parseBoolean(r[1])});
    }
    for (String[] r : read(dir, prefix, "Segment")) {
      nodes.add(new Object[] {"TrackElement", Long.parseLong(r[0]), "kind", "Segment", "length", Long.parseLong(r[1])});
    }
    for (String[] r : read(dir, prefix, "Switch")) {
      nodes.add(new Object[] {"TrackElement", Long.parseLong(r[0]), "kind", "Switch", "currentPosition", r[1]});
    }
    for (String[] r : read(dir, prefix, "Semaphore")) {
      nodes.add(new Object[] {"Semaphore", Long.parseLong(r[0]), "signal", r[1]});
    }
    for (String[] r : read(dir, prefix, "Sensor")) {
      nodes.add(new Object[] {"Sensor", Long.parseLong(r[0])});
    }
    for (String[] r : read(dir, prefix, "SwitchPosition")) {
      nodes.add(new Object[] {"SwitchPosition", Long.parseLong(r[0]), "position", r[1]});
    }
    for (int from = 0; from < nodes.size(); from += BATCH) {
      try (Transaction tx = db.beginTx()) {
        for (Object[] n : nodes.subList(from, Math.min(nodes.size(), from + BATCH))) {
          Node node = tx.createNode(Label.label((String) n[0]));
          node.setProperty("id", n[1]);
          for (int i = 2; i < n.length; i += 2) {
            node.setProperty((String) n[i], n[i + 1]);
          }
          byId.put((Long) n[1], node.getElementId());
        }
        tx.commit();
      }
    }
    String[] links = {"connectsTo", "entry", "exit", "follows", "monitoredBy", "requires", "target"};
    for (String link : links) {
      List<String[]> rows = read(dir, prefix, link);
      RelationshipType type = RelationshipType.withName(link);
      for (int from = 0; from < rows.size(); from += BATCH) {
        try (Transaction tx = db.beginTx()) {
          for (String[] r : rows.subList(from, Math.min(rows.size(), from + BATCH))) {
            Node a = tx.getNodeByElementId(node(byId, r[0], link));
            Node b = tx.getNodeByElementId(node(byId, r[1], link));
            a.createRelationshipTo(b, type);
          }
          tx.commit();
        }
      }
    }
  }

  private static String node(Map<Long, String> byId, String id, String link) {
    String e = byId.get(Long.parseLong(id));
    if (e == null) {
      throw new IllegalStateException(link + " names element " + id + ", which is not in the model");
    }
    return e;
  }
}
