//! The server's diagnostics on standard error, at the level and in the format of the
//! configuration (`log.level`, `log.format`; see [`super::settings`]).
//!
//! - `text`: `espalier serve: message (key=value, …)`, for people;
//! - `json`: one object per line, `{"time": "2025-01-31T12:00:00.123Z", "level": "info",
//!   "message": "…", …fields}`;
//! - `logfmt`: `time=2025-01-31T12:00:00.123Z level=info msg="…" key=value …`.
//!
//! Until [`init`] is called (and in tests and other programs that embed the server) events are
//! written as `text` at level `info`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

pub use super::settings::{LogFormat, LogLevel};

static CONFIG: OnceLock<(LogLevel, LogFormat)> = OnceLock::new();

/// Sets the level and format for the rest of the process (the first call wins).
pub fn init(level: LogLevel, format: LogFormat) {
    let _ = CONFIG.set((level, format));
}

fn config() -> (LogLevel, LogFormat) {
    CONFIG.get().copied().unwrap_or((LogLevel::Info, LogFormat::Text))
}

/// Would an event at `level` be written?
pub fn enabled(level: LogLevel) -> bool {
    level <= config().0
}

/// Writes one event, if its level is enabled: `message`, then `fields` in order.
pub fn event(level: LogLevel, message: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    let (max, format) = config();
    if level > max {
        return;
    }
    let line = render(format, SystemTime::now(), level, message, fields);
    // Diagnostics must never stop the server: a closed standard error loses them.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Writes one event at level `error` (see [`event`]).
pub fn error(message: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    event(LogLevel::Error, message, fields)
}

/// Writes one event at level `warn` (see [`event`]).
pub fn warn(message: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    event(LogLevel::Warn, message, fields)
}

/// Writes one event at level `info` (see [`event`]).
pub fn info(message: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    event(LogLevel::Info, message, fields)
}

/// Makes a panic write one event at level `error` (where, and its message on one line)
/// instead of the default report with its backtrace: a request that still reaches a panic is
/// answered `internal`, and many such requests must not flood the log.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map_or_else(|| "unknown".to_string(), |l| l.to_string());
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let (level, format) = (LogLevel::Error, config().1);
        let line = panic_line(format, SystemTime::now(), &location, message);
        if level <= config().0 {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }));
}

/// A panic's event: its message with line breaks escaped, so that it stays one line.
fn panic_line(format: LogFormat, time: SystemTime, location: &str, message: &str) -> String {
    let message: String = message.escape_debug().collect();
    render(format, time, LogLevel::Error, "a request panicked (a bug)", &[("at", &location), ("panic", &message)])
}

/// One event as a line (with its newline).
pub fn render(
    format: LogFormat,
    time: SystemTime,
    level: LogLevel,
    message: &str,
    fields: &[(&str, &dyn std::fmt::Display)],
) -> String {
    let mut out = String::new();
    match format {
        LogFormat::Text => {
            out.push_str("espalier serve: ");
            if level <= LogLevel::Warn {
                let _ = write!(out, "{}: ", level.name());
            }
            out.push_str(message);
            if !fields.is_empty() {
                let list: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = write!(out, " ({})", list.join(", "));
            }
        }
        LogFormat::Json => {
            // Written by hand to keep time, level and message first.
            let string = |s: &str| serde_json::Value::from(s).to_string();
            let _ = write!(
                out,
                "{{\"time\":{},\"level\":{},\"message\":{}",
                string(&rfc3339(time)),
                string(level.name()),
                string(message)
            );
            for (k, v) in fields {
                let _ = write!(out, ",{}:{}", string(k), string(&v.to_string()));
            }
            out.push('}');
        }
        LogFormat::Logfmt => {
            let _ = write!(out, "time={} level={} msg={}", rfc3339(time), level.name(), logfmt_value(message));
            for (k, v) in fields {
                let _ = write!(out, " {k}={}", logfmt_value(&v.to_string()));
            }
        }
    }
    out.push('\n');
    out
}

/// A logfmt value: bare when it has no space, quote, `=` or control character, else quoted.
fn logfmt_value(v: &str) -> String {
    if !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control()) {
        return v.to_string();
    }
    // A JSON string is a valid logfmt quoted value.
    serde_json::Value::from(v).to_string()
}

/// `time` in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_panic_is_one_line() {
        for format in [LogFormat::Text, LogFormat::Json, LogFormat::Logfmt] {
            let line = panic_line(format, UNIX_EPOCH, "src/run.rs:68:9", "assertion failed\nleft: 1\nright: 2");
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            assert!(line.ends_with('\n') && line.contains("run.rs:68:9") && line.contains("right: 2"), "{line}");
        }
    }

    #[test]
    fn times_are_utc_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T23:59:59.250Z, a leap day.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(1_709_251_199_250)), "2024-02-29T23:59:59.250Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn each_format_writes_one_line() {
        let t = UNIX_EPOCH + Duration::from_secs(86_400);
        let db = "shop db";
        let fields: [(&str, &dyn std::fmt::Display); 2] = [("database", &db), ("tokens", &2)];
        assert_eq!(
            render(LogFormat::Text, t, LogLevel::Info, "serving", &fields),
            "espalier serve: serving (database=shop db, tokens=2)\n"
        );
        assert_eq!(render(LogFormat::Text, t, LogLevel::Warn, "slow", &[]), "espalier serve: warn: slow\n");
        let json = render(LogFormat::Json, t, LogLevel::Info, "serving", &fields);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"time": "1970-01-02T00:00:00.000Z", "level": "info", "message": "serving", "database": "shop db", "tokens": "2"})
        );
        assert_eq!(json.matches('\n').count(), 1);
        assert!(json.starts_with("{\"time\":\"1970-01-02T00:00:00.000Z\",\"level\":\"info\",\"message\":"), "{json}");
        assert_eq!(
            render(LogFormat::Logfmt, t, LogLevel::Error, "it failed", &fields),
            "time=1970-01-02T00:00:00.000Z level=error msg=\"it failed\" database=\"shop db\" tokens=2\n"
        );
    }
}
