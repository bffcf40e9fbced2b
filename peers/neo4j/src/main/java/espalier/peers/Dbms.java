package espalier.peers;

import java.nio.file.Path;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/** How every Neo4j peer driver starts its embedded DBMS. */
final class Dbms {
  private Dbms() {}

  /**
   * The builder of an embedded DBMS in {@code work}, with Neo4j's anonymous usage reports (to
   * udc.neo4j.com) turned off: a benchmark's peer sends nothing off the machine.
   */
  static DatabaseManagementServiceBuilder builder(Path work) {
    return new DatabaseManagementServiceBuilder(work).setConfig(GraphDatabaseSettings.udc_enabled, false);
  }
}
