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
import java.util.concurrent.TimeUnit;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.RelationshipType;
import org.neo4j.graphdb.Result;
import org.neo4j.graphdb.Transaction;

/**
 * A suite's queries on Neo4j Community, embedded, over a property graph built from tables: the peer of {@code espalier bench oo7
 * --peers neo4j}. The protocol is {@code peers/graph.py}'s: the request names the tables' CSV files
 * (with a header row), the node labels and relationship types to build from them, the indexes,
 * and each query's executions per run; the reply gives each run's answer (an aggregate's or the
 * rows' (count, sum), or the rows themselves) and the timed runs' times. Any failure: one line on standard error, exit status 1.
 */
public final class Graph {
  private static final int BATCH = 50_000;

  private Graph() {}

  public static void main(String[] args) {
    try {
      run();
    } catch (Exception e) {
      System.err.println((e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' '));
      System.exit(1);
    }
  }

  /** The rows of a CSV file with a header (RFC 4180 quoting), each by column name. */
  private static List<Map<String, String>> read(Path file) throws IOException {
    List<Map<String, String>> rows = new ArrayList<>();
    try (BufferedReader r = Files.newBufferedReader(file)) {
      List<String> header = fields(r);
      if (header == null) {
        return rows;
      }
      for (List<String> f = fields(r); f != null; f = fields(r)) {
        if (f.size() != header.size()) {
          throw new IOException(file + ": a row of " + f.size() + " fields under " + header.size() + " columns");
        }
        Map<String, String> row = new HashMap<>();
        for (int i = 0; i < f.size(); i++) {
          row.put(header.get(i), f.get(i));
        }
        rows.add(row);
      }
    }
    return rows;
  }

  /** One record's fields, or null at the end; a quoted field may hold commas, quotes, newlines. */
  private static List<String> fields(BufferedReader r) throws IOException {
    int c = r.read();
    if (c < 0) {
      return null;
    }
    List<String> out = new ArrayList<>();
    StringBuilder field = new StringBuilder();
    boolean quoted = false;
    while (true) {
      if (quoted) {
        if (c < 0) {
          throw new IOException("a quoted field is never closed");
        } else if (c == '"') {
          r.mark(1);
          int next = r.read();
          if (next == '"') {
            field.append('"');
          } else {
            quoted = false;
            r.reset();
          }
        } else {
          field.append((char) c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        out.add(field.toString());
        field.setLength(0);
      } else if (c == '\n' || c < 0) {
        out.add(field.toString());
        return out;
      } else if (c != '\r') {
        field.append((char) c);
      }
      c = r.read();
    }
  }

  private static void run() throws Exception {
    ObjectMapper json = new ObjectMapper();
    JsonNode request = json.readTree(System.in);
    Path work = Path.of(request.get("dir").asText()).resolve("neo4j-work");
    int warmup = request.get("warmup").asInt();

    DatabaseManagementService dbms = Dbms.builder(work).build();
    try {
      GraphDatabaseService db = dbms.database("neo4j");
      Map<String, List<Map<String, String>>> tables = new HashMap<>();
      for (JsonNode t : request.get("tables")) {
        tables.put(t.get("name").asText(), read(Path.of(t.get("file").asText())));
      }
      // The load is timed once the database runs and the files are read: starting the DBMS
      // (seconds) is not loading, and the other systems get their input ready-made too.
      long started = System.nanoTime();
      load(db, request, tables);
      double loadMs = (System.nanoTime() - started) / 1e6;

      ObjectNode reply = json.createObjectNode();
      reply.put("system", "neo4j");
      reply.put("version", "Neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion());
      reply.put("load_ms", loadMs);
      ArrayNode out = reply.putArray("queries");
      for (JsonNode query : request.get("queries")) {
        ArrayNode times = json.createArrayNode();
        ArrayNode answers = json.createArrayNode();
        int i = 0;
        for (JsonNode executions : query.get("params")) {
          long t = System.nanoTime();
          JsonNode a = answer(json, db, query, executions);
          if (i >= warmup) {
            times.add((System.nanoTime() - t) / 1e3);
          }
          answers.add(a);
          i++;
        }
        ObjectNode q = out.addObject();
        q.put("name", query.get("name").asText());
        q.set("times_us", times);
        q.set("answers", answers);
      }
      json.writeValue(System.out, reply);
    } finally {
      dbms.shutdown();
    }
  }

  /**
   * One run of a query: every execution in its own read transaction. Its answer: the rows, or
   * (count, sum) wrapping, of an aggregate's one row or of the rows' values.
   */
  private static JsonNode answer(ObjectMapper json, GraphDatabaseService db, JsonNode query, JsonNode executions) {
    String mode = query.get("answer").asText();
    boolean aggregate = mode.equals("aggregate");
    boolean keepRows = mode.equals("rows");
    String cypher = query.get("cypher").asText();
    ArrayNode found = json.createArrayNode();
    long count = 0;
    long sum = 0;
    for (JsonNode params : executions) {
      Map<String, Object> p = new HashMap<>();
      int k = 0;
      for (JsonNode v : params) {
        p.put("p" + k++, v.isIntegralNumber() ? (Object) v.asLong() : (Object) v.asText());
      }
      try (Transaction tx = db.beginTx(); Result result = tx.execute(cypher, p)) {
        List<String> columns = result.columns();
        int rows = 0;
        while (result.hasNext()) {
          Map<String, Object> row = result.next();
          rows++;
          if (keepRows) {
            ArrayNode r = found.addArray();
            for (String c : columns) {
              r.add(json.valueToTree(row.get(c)));
            }
          } else if (aggregate) {
            count += number(row.get(columns.get(0)));
            sum += columns.size() > 1 ? number(row.get(columns.get(1))) : 0;
          } else {
            count++;
            for (String c : columns) {
              sum += number(row.get(c));
            }
          }
        }
        if (aggregate && rows != 1) {
          throw new IllegalStateException(query.get("name").asText() + ": " + rows + " rows from an aggregate");
        }
        tx.commit();
      }
    }
    if (keepRows) {
      return found;
    }
    ArrayNode pair = json.createArrayNode();
    pair.add(count).add(sum);
    return pair;
  }

  private static long number(Object v) {
    if (v == null) {
      return 0;
    }
    if (v instanceof Boolean b) {
      return b ? 1 : 0;
    }
    return ((Number) v).longValue();
  }

  /** Indexes first, then the nodes by label, then the relationships, in batches of BATCH. */
  private static void load(GraphDatabaseService db, JsonNode request, Map<String, List<Map<String, String>>> tables) {
    try (Transaction tx = db.beginTx()) {
      for (JsonNode n : request.get("nodes")) {
        String label = n.get("label").asText();
        String key = n.get("properties").get(0).get(0).asText();
        tx.execute("CREATE INDEX IF NOT EXISTS FOR (n:" + label + ") ON (n." + key + ")");
      }
      for (JsonNode ix : request.get("indexes")) {
        tx.execute("CREATE INDEX IF NOT EXISTS FOR (n:" + ix.get(0).asText() + ") ON (n." + ix.get(1).asText() + ")");
      }
      tx.commit();
    }
    try (Transaction tx = db.beginTx()) {
      tx.schema().awaitIndexesOnline(10, TimeUnit.MINUTES);
      tx.commit();
    }
    // label -> key (as the table's text) -> element id
    Map<String, Map<String, String>> byKey = new HashMap<>();
    for (JsonNode n : request.get("nodes")) {
      String label = n.get("label").asText();
      List<Map<String, String>> rows = tables.get(n.get("table").asText());
      JsonNode props = n.get("properties");
      String key = props.get(0).get(0).asText();
      Map<String, String> ids = byKey.computeIfAbsent(label, l -> new HashMap<>());
      for (int from = 0; from < rows.size(); from += BATCH) {
        try (Transaction tx = db.beginTx()) {
          for (Map<String, String> row : rows.subList(from, Math.min(rows.size(), from + BATCH))) {
            Node node = tx.createNode(Label.label(label));
            for (JsonNode p : props) {
              String column = p.get(0).asText();
              String value = row.get(column);
              if (value == null || value.isEmpty()) {
                continue;
              }
              node.setProperty(column, p.get(1).asText().equals("INT64") ? (Object) Long.parseLong(value) : value);
            }
            ids.put(row.get(key), node.getElementId());
          }
          tx.commit();
        }
      }
    }
    for (JsonNode r : request.get("rels")) {
      RelationshipType type = RelationshipType.withName(r.get("type").asText());
      Map<String, String> sources = byKey.get(r.get("from").get(0).asText());
      Map<String, String> targets = byKey.get(r.get("to").get(0).asText());
      String src = r.get("from").get(1).asText();
      String dst = r.get("to").get(1).asText();
      List<Map<String, String>> rows = tables.get(r.get("table").asText());
      for (int from = 0; from < rows.size(); from += BATCH) {
        try (Transaction tx = db.beginTx()) {
          for (Map<String, String> row : rows.subList(from, Math.min(rows.size(), from + BATCH))) {
            String s = row.get(src);
            String d = row.get(dst);
            if (s == null || s.isEmpty() || d == null || d.isEmpty()) {
              continue;
            }
            Node a = tx.getNodeByElementId(element(sources, s, type.name()));
            Node b = tx.getNodeByElementId(element(targets, d, type.name()));
            a.createRelationshipTo(b, type);
          }
          tx.commit();
        }
      }
    }
  }

  private static String element(Map<String, String> ids, String key, String type) {
    String e = ids.get(key);
    if (e == null) {
      throw new IllegalStateException(type + " names node " + key + ", which is not in the database");
    }
    return e;
  }
}
