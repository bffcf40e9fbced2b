package espalier.peers;

/** What every peer driver's {@code main} does around its body: the one failure rule. */
final class DriverMain {
  private DriverMain() {}

  /** A driver's body. */
  interface Body {
    void run() throws Exception;
  }

  /**
   * Runs {@code body}. Any failure is one line on standard error (the exception's class and
   * message) and exit status 1, which the Rust side reports as the peer's error.
   */
  static void run(Body body) {
    try {
      body.run();
    } catch (Exception e) {
      System.err.println((e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' '));
      System.exit(1);
    }
  }
}
