package espalier.peers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.graphdb.GraphDatabaseService;
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
  private Graph() {}

  public static void main(String[] args) {
    DriverMain.run(Graph::run);
  }

  private static void run() throws Exception {
    ObjectMapper json = new ObjectMapper();
    JsonNode request = json.readTree(System.in);
    Path work = Path.of(request.get("dir").asText()).resolve("neo4j-work");
    int warmup = request.get("warmup").asInt();

    DatabaseManagementService dbms = Dbms.builder(work).build();
    try {
      GraphDatabaseService db = dbms.database("neo4j");
      Map<String, List<Map<String, String>>> tables = PropertyGraph.tables(request);
      // The load is timed once the database runs and the files are read: starting the DBMS
      // (seconds) is not loading, and the other systems get their input ready-made too.
      long started = System.nanoTime();
      PropertyGraph.load(db, request, tables);
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

}
