package espalier.peers;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.ConnectorPortRegister;
import org.neo4j.configuration.connectors.ConnectorType;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.driver.AccessMode;
import org.neo4j.driver.AuthTokens;
import org.neo4j.driver.Config;
import org.neo4j.driver.Driver;
import org.neo4j.driver.GraphDatabase;
import org.neo4j.driver.Logging;
import org.neo4j.driver.Record;
import org.neo4j.driver.Session;
import org.neo4j.driver.SessionConfig;
import org.neo4j.driver.Value;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.internal.helpers.HostnamePort;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * The social network's graph queries on Neo4j Community over Bolt, K clients at a time: the peer
 * of {@code espalier bench social --peers neo4j-bolt}, beside Espalier's runs over its server.
 *
 * <p>One JSON request on standard input: a graph request's {@code dir}, {@code tables}, {@code
 * nodes}, {@code rels} and {@code indexes} ({@code peers/graph.py}), loaded by {@link
 * PropertyGraph} exactly as {@link Graph} loads it, into an embedded DBMS whose Bolt connector
 * listens on 127.0.0.1 at a free port (no authentication, no encryption); and
 *
 * <pre>
 *   "clients": [K, …], "seconds": S | null, "requests": N | null, "warmup_seconds": W,
 *   "jvm_warmup_seconds": J, "max_samples": M,
 *   "queries": [{"name": Q, "cypher": CYPHER,
 *                "pool": [{"params": [V, …], "rows": [[V, …], …]}, …]}, …]
 * </pre>
 *
 * <p>First, untimed, one client runs every invocation of every pool once, then again in rounds
 * until {@code jvm_warmup_seconds} (J) have passed: the queries are planned, the JVM compiles the
 * code they run and the pages they read are cached. Those replies are checked too and counted in
 * each query's first point. Then for each query and each K, one point: K client threads, each with its own session of the
 * official Java driver over one connection, in a closed loop as Espalier's remote clients ({@code
 * crates/bench/src/remote/driver.rs}, the same xorshift picks): take an invocation of the pool at
 * random, run the Cypher with its parameters ({@code $p0}, {@code $p1}, …) as one auto-commit
 * query, read all its rows, and compare them with the invocation's rows (in order; JSON text and
 * integers against the driver's strings and integers). Every reply is checked, warm-up included:
 * a different one is wrong, an exception failed. With {@code seconds}, every client runs W
 * seconds of warm-up then S measured, and an invocation counts if it ended inside the S seconds;
 * with {@code requests}, the clients share numbered tickets, the first max(N / 10, K) untimed,
 * and the time is from the first measured start to the last measured end. Only right replies
 * count for throughput and latency; at most M latencies are kept per point (M / K per client).
 *
 * <p>The reply, on standard output:
 *
 * <pre>
 *   {"system": "neo4j-bolt", "version": "Neo4j 5.26.0", "driver": "Neo4j Java driver 5.26.0",
 *    "address": "127.0.0.1:PORT", "load_ms": …, "jvm_warmup_s": …,
 *    "points": [{"query": Q, "clients": K, "seconds": …, "operations": N, "checked": …,
 *                "failed": …, "wrong": …, "examples": [TEXT, …], "latency_ns": [NS, …],
 *                "samples_capped": BOOL}, …]}
 * </pre>
 *
 * <p>Starting, loading or connecting failing: one line on standard error, exit status 1. Wrong
 * and failed replies are counted in the points, not fatal here.
 */
public final class Bolt {
  /** Examples of failed and wrong replies kept per point (the counts are exact). */
  private static final int MAX_EXAMPLES = 5;
  /** A client stops after this many failures in a row (a dead connection must not spin). */
  private static final long MAX_FAILURES_IN_A_ROW = 1000;
  /** Longest example text. */
  private static final int MAX_EXAMPLE_CHARS = 300;

  private Bolt() {}

  public static void main(String[] args) {
    DriverMain.run(Bolt::run);
  }

  /** One invocation of a pool: its parameters and the rows its reply must hold. */
  private record Invocation(Map<String, Object> params, List<List<Object>> rows) {}

  /** A query: its name, its Cypher, and the pool of invocations the clients pick among. */
  private record Query(String name, String cypher, List<Invocation> pool) {}

  /** When a point ends: after {@code seconds} of measuring, or {@code requests} operations. */
  private record Stop(double seconds, long requests) {
    boolean bySeconds() {
      return requests == 0;
    }
  }

  private static void run() throws Exception {
    ObjectMapper json = new ObjectMapper();
    JsonNode request = json.readTree(System.in);
    Path work = Path.of(request.get("dir").asText()).resolve("neo4j-bolt-work");
    List<Integer> clients = new ArrayList<>();
    for (JsonNode k : request.get("clients")) {
      if (!k.canConvertToInt() || k.asInt() < 1) {
        throw new IllegalArgumentException("clients: " + k + " is not a positive count");
      }
      clients.add(k.asInt());
    }
    JsonNode seconds = request.path("seconds");
    JsonNode requests = request.path("requests");
    Stop stop;
    if (requests.canConvertToLong() && requests.asLong() > 0) {
      stop = new Stop(0, requests.asLong());
    } else if (seconds.isNumber() && seconds.asDouble() > 0) {
      stop = new Stop(seconds.asDouble(), 0);
    } else {
      throw new IllegalArgumentException("give seconds > 0 or requests > 0");
    }
    double warmupSeconds = Math.max(0, request.path("warmup_seconds").asDouble(0));
    double jvmWarmupSeconds = Math.max(0, request.path("jvm_warmup_seconds").asDouble(0));
    int maxSamples = Math.max(1, request.path("max_samples").asInt(1_000_000));
    int maxClients = clients.stream().mapToInt(Integer::intValue).max().orElse(1);

    DatabaseManagementService dbms =
        Dbms.builder(work)
            .setConfig(GraphDatabaseSettings.default_listen_address, new SocketAddress("127.0.0.1"))
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", 0))
            .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
            .setConfig(GraphDatabaseSettings.auth_enabled, false)
            // The reply is written before the shutdown, with every connection closed: Netty's
            // graceful wait for more work (quiet period and timeout, 10 s here) is only time lost.
            .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
            .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(1))
            .build();
    try {
      GraphDatabaseService db = dbms.database("neo4j");
      Map<String, List<Map<String, String>>> tables = PropertyGraph.tables(request);
      // Timed as Graph times it: once the database runs and the files are read.
      long started = System.nanoTime();
      PropertyGraph.load(db, request, tables);
      double loadMs = (System.nanoTime() - started) / 1e6;

      HostnamePort bolt =
          ((GraphDatabaseAPI) db)
              .getDependencyResolver()
              .resolveDependency(ConnectorPortRegister.class)
              .getLocalAddress(ConnectorType.BOLT);
      if (bolt == null) {
        throw new IllegalStateException("the Bolt connector did not start");
      }
      String address = "127.0.0.1:" + bolt.getPort();
      Config config =
          Config.builder()
              .withoutEncryption()
              .withMaxConnectionPoolSize(maxClients)
              .withTelemetryDisabled(true)
              .withLogging(Logging.none())
              .build();
      ObjectNode reply = json.createObjectNode();
      reply.put("system", "neo4j-bolt");
      reply.put("version", "Neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion());
      reply.put("driver", "Neo4j Java driver " + driverVersion());
      reply.put("address", address);
      reply.put("load_ms", loadMs);
      ArrayNode points = reply.putArray("points");
      try (Driver driver = GraphDatabase.driver("bolt://" + address, AuthTokens.none(), config)) {
        driver.verifyConnectivity();
        List<Query> queries = new ArrayList<>();
        for (JsonNode query : request.get("queries")) {
          Query q = new Query(query.get("name").asText(), query.get("cypher").asText(), pool(query.get("pool")));
          if (q.pool().isEmpty()) {
            throw new IllegalArgumentException(q.name() + ": an empty pool");
          }
          queries.add(q);
        }
        long warming = System.nanoTime();
        List<Tally> before = warmUp(driver, queries, jvmWarmupSeconds);
        reply.put("jvm_warmup_s", (System.nanoTime() - warming) / 1e9);
        for (int i = 0; i < queries.size(); i++) {
          Query q = queries.get(i);
          Tally first = before.get(i);
          for (int k : clients) {
            points.add(point(json, driver, q, k, stop, warmupSeconds, maxSamples, first));
            first = null;
          }
        }
      }
      json.writeValue(System.out, reply);
    } finally {
      dbms.shutdown();
    }
  }

  /** The driver's version, as its jar's manifest gives it (without the build's commit). */
  private static String driverVersion() {
    String v = Driver.class.getPackage().getImplementationVersion();
    if (v == null) {
      return "(unknown version)";
    }
    int dash = v.indexOf('-');
    return dash > 0 ? v.substring(0, dash) : v;
  }

  /** A query's invocations: parameters as Graph passes them, rows as Java values. */
  private static List<Invocation> pool(JsonNode pool) {
    List<Invocation> out = new ArrayList<>();
    for (JsonNode inv : pool) {
      Map<String, Object> params = new HashMap<>();
      int i = 0;
      for (JsonNode v : inv.get("params")) {
        params.put("p" + i++, v.isIntegralNumber() ? (Object) v.asLong() : (Object) v.asText());
      }
      List<List<Object>> rows = new ArrayList<>();
      for (JsonNode row : inv.get("rows")) {
        List<Object> values = new ArrayList<>();
        for (JsonNode v : row) {
          values.add(value(v));
        }
        rows.add(values);
      }
      out.add(new Invocation(params, rows));
    }
    return out;
  }

  /** A JSON value as the driver gives the same value: text, a long, a double, a boolean, null. */
  private static Object value(JsonNode v) {
    if (v.isNull()) {
      return null;
    } else if (v.isIntegralNumber()) {
      return v.asLong();
    } else if (v.isNumber()) {
      return v.asDouble();
    } else if (v.isBoolean()) {
      return v.asBoolean();
    }
    return v.asText();
  }

  /** Why the reply's records are not the rows expected; null when they are. */
  private static String compare(List<Record> got, List<List<Object>> want) {
    if (got.size() != want.size()) {
      return got.size() + " rows, expected " + want.size();
    }
    for (int i = 0; i < got.size(); i++) {
      List<Object> row = new ArrayList<>();
      for (Value v : got.get(i).values()) {
        row.add(v.asObject());
      }
      if (!row.equals(want.get(i))) {
        return "row " + i + " is " + row + ", expected " + want.get(i);
      }
    }
    return null;
  }

  /** The shared clock of a point (System.nanoTime). */
  private static final class Clock {
    final Stop stop;
    final long from;
    final long until;
    final AtomicLong tickets = new AtomicLong();
    final long warm;
    final long total;

    Clock(Stop stop, long from, long until, long warm, long total) {
      this.stop = stop;
      this.from = from;
      this.until = until;
      this.warm = warm;
      this.total = total;
    }
  }

  /** One client's counts and latencies. */
  private static final class Tally {
    long[] samples = new long[64];
    int kept;
    long measured;
    long checked;
    long failed;
    long wrong;
    long uncounted;
    long firstStart = Long.MAX_VALUE;
    long lastEnd = Long.MIN_VALUE;
    final List<String> examples = new ArrayList<>();

    void example(String what) {
      if (examples.size() < MAX_EXAMPLES) {
        examples.add(what.length() > MAX_EXAMPLE_CHARS ? what.substring(0, MAX_EXAMPLE_CHARS) + "…" : what);
      }
    }

    void sample(long ns, int max) {
      if (kept >= max) {
        uncounted++;
        return;
      }
      if (kept == samples.length) {
        samples = Arrays.copyOf(samples, Math.min(max, samples.length * 2));
      }
      samples[kept++] = ns;
    }
  }

  /** K clients running query {@code q} through warm-up and measurement: the point. */
  private static ObjectNode point(
      ObjectMapper json,
      Driver driver,
      Query q,
      int k,
      Stop stop,
      double warmupSeconds,
      int maxSamples,
      Tally before)
      throws InterruptedException {
    long now = System.nanoTime();
    long from = now + (long) (warmupSeconds * 1e9);
    long until = from + (long) (stop.seconds() * 1e9);
    long warm = stop.bySeconds() ? 0 : Math.max(stop.requests() / 10, k);
    long total = stop.bySeconds() ? 0 : warm + stop.requests();
    Clock clock = new Clock(stop, from, until, warm, total);
    int perClient = Math.max(1, maxSamples / k);
    Tally[] tallies = new Tally[k];
    Thread[] threads = new Thread[k];
    for (int i = 0; i < k; i++) {
      Tally t = new Tally();
      int index = i;
      tallies[i] = t;
      threads[i] = new Thread(() -> client(driver, q, clock, index, t, perClient), "bolt-client-" + i);
      threads[i].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    ObjectNode p = json.createObjectNode();
    long measured = 0;
    long checked = 0;
    long failed = 0;
    long wrong = 0;
    long firstStart = Long.MAX_VALUE;
    long lastEnd = Long.MIN_VALUE;
    boolean capped = false;
    ArrayNode examples = json.createArrayNode();
    ArrayNode latency = json.createArrayNode();
    List<Tally> all = new ArrayList<>(Arrays.asList(tallies));
    if (before != null) {
      all.add(0, before);
    }
    for (Tally t : all) {
      measured += t.measured;
      checked += t.checked;
      failed += t.failed;
      wrong += t.wrong;
      firstStart = Math.min(firstStart, t.firstStart);
      lastEnd = Math.max(lastEnd, t.lastEnd);
      capped |= t.uncounted > 0;
      for (String e : t.examples) {
        if (examples.size() < MAX_EXAMPLES) {
          examples.add(e);
        }
      }
      for (int i = 0; i < t.kept; i++) {
        latency.add(t.samples[i]);
      }
    }
    double seconds;
    if (stop.bySeconds()) {
      seconds = stop.seconds();
    } else {
      seconds = lastEnd > firstStart ? (lastEnd - firstStart) / 1e9 : 0;
    }
    p.put("query", q.name());
    p.put("clients", k);
    p.put("seconds", seconds);
    p.put("operations", measured);
    p.put("checked", checked);
    p.put("failed", failed);
    p.put("wrong", wrong);
    p.set("examples", examples);
    p.set("latency_ns", latency);
    p.put("samples_capped", capped);
    return p;
  }

  /**
   * Before the first point, one client runs every invocation of every query's pool once, then
   * again in rounds until {@code seconds} have passed: the queries are planned, the JVM compiles
   * the code they run (Espalier is compiled ahead of time) and the pages they read are cached
   * before anything is measured. Its replies are checked like the points' and counted in each
   * query's first point: the tallies, in the order of {@code queries}.
   */
  private static List<Tally> warmUp(Driver driver, List<Query> queries, double seconds) {
    List<Tally> tallies = new ArrayList<>();
    for (int i = 0; i < queries.size(); i++) {
      tallies.add(new Tally());
    }
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    try (Session session = driver.session(sessionConfig())) {
      for (boolean first = true; first || System.nanoTime() - deadline < 0; first = false) {
        for (int i = 0; i < queries.size(); i++) {
          Query q = queries.get(i);
          Tally t = tallies.get(i);
          for (Invocation inv : q.pool()) {
            if (!first && System.nanoTime() - deadline >= 0) {
              return tallies;
            }
            t.checked++;
            try {
              String why = compare(session.run(q.cypher(), inv.params()).list(), inv.rows());
              if (why != null) {
                t.wrong++;
                t.example("wrong (warming up): " + why);
              }
            } catch (RuntimeException e) {
              t.failed++;
              t.example("failed (warming up): " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
          }
        }
      }
    } catch (RuntimeException e) {
      Tally t = tallies.get(0);
      t.failed++;
      t.example("failed: the warm-up's session: " + e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    return tallies;
  }

  /** Every client's session: the one database, read access, auto-commit queries. */
  private static SessionConfig sessionConfig() {
    return SessionConfig.builder().withDatabase("neo4j").withDefaultAccessMode(AccessMode.READ).build();
  }

  /** One client's closed loop, on its own session. */
  private static void client(Driver driver, Query q, Clock clock, int index, Tally t, int maxSamples) {
    List<Invocation> pool = q.pool();
    // xorshift, seeded as Espalier's client `index`: the same picks.
    long state = 0x9E3779B97F4A7C15L ^ ((index + 1L) * 0xBF58476D1CE4E5B9L);
    long inARow = 0;
    try (Session session = driver.session(sessionConfig())) {
      while (true) {
        Boolean measuredTicket = null;
        if (clock.stop.bySeconds()) {
          if (System.nanoTime() - clock.until >= 0) {
            break;
          }
        } else {
          long ticket = clock.tickets.getAndIncrement();
          if (ticket >= clock.total) {
            break;
          }
          measuredTicket = ticket >= clock.warm;
        }
        state ^= state << 13;
        state ^= state >>> 7;
        state ^= state << 17;
        Invocation inv = pool.get((int) Long.remainderUnsigned(state, pool.size()));
        long start = System.nanoTime();
        boolean ok = false;
        t.checked++;
        try {
          String why = compare(session.run(q.cypher(), inv.params()).list(), inv.rows());
          if (why == null) {
            ok = true;
          } else {
            t.wrong++;
            t.example("wrong: " + why);
          }
        } catch (RuntimeException e) {
          t.failed++;
          t.example("failed: " + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        long end = System.nanoTime();
        inARow = ok ? 0 : inARow + 1;
        boolean measured =
            measuredTicket != null ? measuredTicket : end - clock.from >= 0 && end - clock.until <= 0;
        if (measured) {
          t.firstStart = Math.min(t.firstStart, start);
          t.lastEnd = Math.max(t.lastEnd, end);
          if (ok) {
            t.measured++;
            t.sample(end - start, maxSamples);
          }
        }
        if (inARow >= MAX_FAILURES_IN_A_ROW) {
          break;
        }
      }
    } catch (RuntimeException e) {
      // Opening or closing the session: the client's remaining work is lost, and said.
      t.failed++;
      t.example("failed: the session: " + e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }
}
