package espalier.peers;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.RelationshipType;
import org.neo4j.graphdb.Transaction;

/**
 * The property graph of a graph request ({@code peers/graph.py}'s protocol: {@code tables},
 * {@code nodes}, {@code rels}, {@code indexes}): its tables read from their CSV files, then its
 * indexes, nodes and relationships created. The one loading path of {@link Graph} (embedded) and
 * {@link Bolt} (over Bolt).
 */
final class PropertyGraph {
  private static final int BATCH = 50_000;

  private PropertyGraph() {}

  /** The request's tables, each by name: its rows, each by column name. */
  static Map<String, List<Map<String, String>>> tables(JsonNode request) throws IOException {
    Map<String, List<Map<String, String>>> tables = new HashMap<>();
    for (JsonNode t : request.get("tables")) {
      tables.put(t.get("name").asText(), read(Path.of(t.get("file").asText())));
    }
    return tables;
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

  /** Indexes first, then the nodes by label, then the relationships, in batches of BATCH. */
  static void load(GraphDatabaseService db, JsonNode request, Map<String, List<Map<String, String>>> tables) {
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
