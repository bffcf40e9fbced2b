//! How replies and errors look: tables or JSON for replies, `error[<code>]: …` for errors.

use std::fmt::Write as _;

use clap::ValueEnum;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use espalier_instruction::{InstructionError, QueryResult, Reply};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables for queries, indented JSON for `get`, one line for mutations.
    Table,
    /// Pretty-printed JSON for every reply.
    Json,
}

/// Prints a benchmark report on standard output: pretty JSON with `--json`, else Markdown.
#[cfg(feature = "peers")]
pub fn print_report<J: serde::Serialize>(
    json: bool,
    to_json: impl FnOnce() -> J,
    to_markdown: impl FnOnce() -> String,
) -> Result<(), String> {
    if json {
        let text = serde_json::to_string_pretty(&to_json()).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", to_markdown());
    }
    Ok(())
}

/// Writes a benchmark's chart to `path` as SVG, whole or not at all (nothing without a path).
#[cfg(feature = "peers")]
pub fn write_svg(path: Option<&std::path::Path>, chart: impl FnOnce() -> String) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let chart = chart();
    espalier_bench::suite::report::write_atomic(path, |w| std::io::Write::write_all(w, chart.as_bytes()))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The text printed for a reply (ends with a line break).
pub fn render_reply(reply: &Reply, format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&reply_json(reply)).unwrap_or_else(|e| format!("\"{e}\""));
            s.push('\n');
            s
        }
        Format::Table => {
            let mut out = String::new();
            table_reply(reply, &mut out);
            out
        }
    }
}

/// The JSON form of a reply: a query result, a node, `{"done": …}` or a list for transactions.
pub fn reply_json(reply: &Reply) -> serde_json::Value {
    match reply {
        Reply::Query(q) => serde_json::to_value(q).unwrap_or(serde_json::Value::Null),
        Reply::Node(n) => n.clone(),
        Reply::Done { version, changes } => {
            serde_json::json!({ "done": { "version": version, "changes": changes } })
        }
        Reply::Transaction(list) => serde_json::Value::Array(list.iter().map(reply_json).collect()),
    }
}

fn table_reply(reply: &Reply, out: &mut String) {
    match reply {
        Reply::Query(q) => out.push_str(&query_table(q)),
        Reply::Node(n) => {
            out.push_str(&serde_json::to_string_pretty(n).unwrap_or_else(|e| format!("\"{e}\"")));
            out.push('\n');
        }
        Reply::Done { version, changes } => {
            let _ = writeln!(out, "done: version {version}, {changes} {}", plural(*changes, "change", "changes"));
        }
        Reply::Transaction(list) => {
            // Every mutation of a transaction shares one commit; say it once.
            let mut done = None;
            for r in list {
                match r {
                    Reply::Done { version, changes } => done = Some((*version, *changes)),
                    other => table_reply(other, out),
                }
            }
            if let Some((version, changes)) = done {
                let _ = writeln!(
                    out,
                    "done: transaction, version {version}, {changes} {}",
                    plural(changes, "change", "changes")
                );
            }
        }
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// A query result as a table: the key column, one column per projection, then `total: N`.
pub fn query_table(q: &QueryResult) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    let mut header = vec!["key".to_string()];
    header.extend(q.columns.iter().cloned());
    table.set_header(header);
    for row in &q.rows {
        let mut cells = vec![row.key.join(" / ")];
        cells.extend(row.values.iter().map(cell));
        table.add_row(cells);
    }
    let mut out = String::new();
    if !q.rows.is_empty() || !q.columns.is_empty() {
        let _ = writeln!(out, "{table}");
    }
    let shown = q.rows.len() as u64;
    if shown == q.total {
        let _ = writeln!(out, "total: {}", q.total);
    } else {
        let _ = writeln!(out, "total: {} ({shown} shown)", q.total);
    }
    out
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        serde_json::Value::Array(parts) if parts.iter().all(|p| p.is_string()) => {
            parts.iter().filter_map(|p| p.as_str()).collect::<Vec<_>>().join(" / ")
        }
        other => other.to_string(),
    }
}

/// `error[<code>]: message`, then the source line with a caret when the error has a place in
/// `source`.
pub fn render_error(e: &InstructionError, source: Option<&str>) -> String {
    let mut out = format!("error[{}]: {e}\n", e.code());
    let diagnostic = match e {
        InstructionError::Parse(p) => Some(&p.0),
        InstructionError::Check(d) => Some(d),
        _ => None,
    };
    if let (Some(d), Some(src)) = (diagnostic, source) {
        if d.line > 0 && !src.trim_start().starts_with('{') {
            // `render` repeats the message on its first line; keep the picture only.
            let rendered = d.render(src, "instruction");
            for line in rendered.lines().skip(1) {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_instruction::Row;

    #[test]
    fn table_has_key_columns_and_total() {
        let q = QueryResult {
            total: 3,
            columns: vec!["Qty".into()],
            rows: vec![Row { key: vec!["o1".into()], values: vec![serde_json::json!(5)] }],
        };
        let t = query_table(&q);
        assert!(t.contains("key"), "{t}");
        assert!(t.contains("Qty"), "{t}");
        assert!(t.contains("o1"), "{t}");
        assert!(t.ends_with("total: 3 (1 shown)\n"), "{t}");
    }

    #[test]
    fn done_line() {
        let r = Reply::Done { version: 7, changes: 1 };
        assert_eq!(render_reply(&r, Format::Table), "done: version 7, 1 change\n");
    }
}
