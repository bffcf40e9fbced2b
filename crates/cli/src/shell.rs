//! `espalier shell`: an interactive loop over instructions (rustyline), or a script runner
//! when standard input is not a terminal.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use espalier_instruction::{Engine, ParamValue};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;

use crate::complete::{ShellHelper, Vocabulary};
use crate::exec::{format_of, parse_params, run_one};
use crate::output::{render_error, render_reply, Format};
use crate::{db, Failure, Global};

const HELP: &str = "\
Type an instruction and press Enter. It may continue over several lines while a `(`, `[` or `{`
is open, or while a line ends with `\\`. Text is the instruction language of docs/instructions.md;
a block that starts with `{` is the JSON form.

  update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )
  collection select . 'Orders' 'Qty' -> number : 'Quantity' 'Client' -> reference : 'Client'
  get . 'Orders' : \"o1\"
  command 'pulse' ( 'machine' -> \"M1\" )
  transaction ( update . 'Orders' : \"o1\" ( 'Quantity' -> number - 5 ), update . 'Orders' : \"o2\" ( 'Quantity' -> number + 5 ) )

Tab completes instruction words, the schema's property and command names ('Orders'), and
after `:` in a path the keys of the collection it names (get . 'Orders' : \"o<Tab>).

Shell commands:
  .help                 this text (also `help`)
  .schema               print the schema source
  .describe             summarise the schema (node types, records, references, commands, indexes)
  .format table|json    how replies are printed
  .param NAME=VALUE     set a parameter, used as $NAME; `.param` alone lists them
  .quit                 leave (also .exit, `quit`, `exit` or Ctrl-D)
";

/// The shell's state.
struct Session {
    engine: Arc<Engine>,
    format: Format,
    params: HashMap<String, ParamValue>,
}

/// What a block did.
enum Outcome {
    Ok,
    Failed,
    Quit,
}

impl Session {
    /// Runs one complete block: a shell command or an instruction. Replies go to stdout,
    /// errors to stderr.
    fn block(&mut self, block: &str) -> Outcome {
        let trimmed = block.trim();
        if trimmed.starts_with('.') {
            return self.dot(trimmed);
        }
        // `help`, `quit` and `exit` as the shell's own (no instruction starts with them).
        if let Some(dot) = bare_shell_command(trimmed) {
            return self.dot(&dot);
        }
        match run_one(&self.engine, block, &self.params) {
            Ok(reply) => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(render_reply(&reply, self.format).as_bytes());
                let _ = out.flush();
                Outcome::Ok
            }
            Err(f) => {
                report(&f);
                Outcome::Failed
            }
        }
    }

    fn dot(&mut self, line: &str) -> Outcome {
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match cmd {
            ".help" | ".h" | ".?" => print!("{HELP}"),
            ".quit" | ".exit" | ".q" => return Outcome::Quit,
            ".schema" => {
                let src = &self.engine.schema().source;
                print!("{src}");
                if !src.ends_with('\n') {
                    println!();
                }
            }
            ".describe" => print!("{}", espalier_schema::describe(self.engine.schema())),
            ".format" => match rest {
                "table" => self.format = Format::Table,
                "json" => self.format = Format::Json,
                "" => println!("{}", if self.format == Format::Json { "json" } else { "table" }),
                other => {
                    eprintln!("error: unknown format {other:?}; use `.format table` or `.format json`");
                    return Outcome::Failed;
                }
            },
            ".param" | ".params" => {
                if rest.is_empty() {
                    let mut names: Vec<_> = self.params.iter().collect();
                    names.sort_by(|a, b| a.0.cmp(b.0));
                    for (name, value) in names {
                        match value {
                            ParamValue::Text(t) => println!("${name} = {t}"),
                            ParamValue::Int(i) => println!("${name} = {i}"),
                        }
                    }
                } else {
                    match parse_params(&[rest.to_string()]) {
                        Ok(p) => self.params.extend(p),
                        Err(f) => {
                            report(&f);
                            return Outcome::Failed;
                        }
                    }
                }
            }
            other => {
                eprintln!("error: unknown shell command {other}; .help lists them");
                return Outcome::Failed;
            }
        }
        let _ = std::io::stdout().flush();
        Outcome::Ok
    }
}

/// `help`, `help …`, `quit`, `exit` (any case, a trailing `;` allowed) as `.help`, `.quit`.
fn bare_shell_command(block: &str) -> Option<String> {
    let word = block.trim_end_matches(';').trim();
    let (head, rest) = word.split_once(char::is_whitespace).unwrap_or((word, ""));
    match head.to_ascii_lowercase().as_str() {
        "help" => Some(format!(".help {rest}")),
        "quit" | "exit" if rest.is_empty() => Some(".quit".into()),
        _ => None,
    }
}

fn report(f: &Failure) {
    match f {
        Failure::Instruction(e, source) => eprint!("{}", render_error(e, source.as_deref())),
        Failure::Other(m) => eprintln!("error: {m}"),
        Failure::Exit(_) => {}
    }
}

/// Where the history is kept: `$ESPALIER_HISTORY`, else `~/.espalier_history`.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ESPALIER_HISTORY") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".espalier_history"))
}

pub fn shell(g: &Global) -> Result<(), Failure> {
    let engine = Arc::new(db::open(g)?);
    let mut session = Session { engine, format: format_of(g, None), params: HashMap::new() };
    if std::io::stdin().is_terminal() {
        interactive(g, &mut session)
    } else {
        script(&mut session)
    }
}

/// Reads blocks from a non-terminal standard input and runs them; exit status 2 if any failed.
fn script(session: &mut Session) -> Result<(), Failure> {
    let stdin = std::io::stdin();
    let mut blocks = Blocks::default();
    let mut failed = false;
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Failure::other(format!("reading standard input: {e}")))?;
        let Some(block) = blocks.push(&line) else { continue };
        match session.block(&block) {
            Outcome::Ok => {}
            Outcome::Failed => failed = true,
            Outcome::Quit => return if failed { Err(Failure::Exit(2)) } else { Ok(()) },
        }
    }
    if let Some(rest) = blocks.finish() {
        if let Outcome::Failed = session.block(&rest) {
            failed = true;
        }
    }
    if failed {
        Err(Failure::Exit(2))
    } else {
        Ok(())
    }
}

fn interactive(g: &Global, session: &mut Session) -> Result<(), Failure> {
    let mut editor = rustyline::Editor::<ShellHelper, DefaultHistory>::new()
        .map_err(|e| Failure::other(format!("starting the line editor: {e}")))?;
    let vocab = Vocabulary::of(session.engine.schema());
    editor.set_helper(Some(ShellHelper { engine: session.engine.clone(), vocab }));
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is normal the first time.
        let _ = editor.load_history(path);
    }
    println!(
        "Espalier shell on {} (version {}). Type help for help (Tab completes), .quit to leave.",
        g.db.display(),
        session.engine.database().version()
    );
    let mut blocks = Blocks::default();
    loop {
        let prompt = if blocks.is_empty() { "espalier> " } else { "      ..> " };
        match editor.readline(prompt) {
            Ok(line) => {
                let Some(block) = blocks.push(&line) else { continue };
                let _ = editor.add_history_entry(block.as_str());
                if let Outcome::Quit = session.block(&block) {
                    break;
                }
            }
            // Ctrl-C abandons the block being typed.
            Err(ReadlineError::Interrupted) => {
                if blocks.is_empty() {
                    println!("(.quit or Ctrl-D to leave)");
                }
                blocks = Blocks::default();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: reading input: {e}");
                break;
            }
        }
    }
    if let Some(path) = &history {
        if let Err(e) = editor.save_history(path) {
            eprintln!("warning: could not save the history to {}: {e}", path.display());
        }
    }
    Ok(())
}

/// Collects lines into blocks: a block is complete when its brackets balance and its last line
/// does not end with `\`.
#[derive(Default)]
struct Blocks {
    buf: String,
}

impl Blocks {
    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Adds a line; returns the block when it is complete (blank and comment-only blocks are
    /// dropped).
    fn push(&mut self, line: &str) -> Option<String> {
        if self.buf.is_empty() && line.trim_start().starts_with('.') {
            return Some(line.to_string());
        }
        let (line, continued) = match line.trim_end().strip_suffix('\\') {
            Some(head) => (head, true),
            None => (line, false),
        };
        if !self.buf.is_empty() {
            self.buf.push('\n');
        }
        self.buf.push_str(line);
        let scan = scan(&self.buf);
        if !scan.has_code {
            if !continued {
                self.buf.clear();
            }
            return None;
        }
        if continued || scan.depth > 0 {
            return None;
        }
        Some(std::mem::take(&mut self.buf))
    }

    /// What is left at the end of the input (an unclosed block), to be run for its error.
    fn finish(self) -> Option<String> {
        if scan(&self.buf).has_code {
            Some(self.buf)
        } else {
            None
        }
    }
}

/// What a scan of a block found.
#[derive(Debug, PartialEq, Eq)]
struct Scan {
    /// Open `(`, `[` and `{` minus closed ones, outside strings, names and comments.
    depth: i64,
    /// Anything besides whitespace and comments.
    has_code: bool,
}

fn scan(text: &str) -> Scan {
    let mut depth = 0i64;
    let mut has_code = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                has_code = true;
                // A string or a name: up to the matching quote; `\` escapes the next character.
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for d in chars.by_ref() {
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
            }
            '(' | '[' | '{' => {
                has_code = true;
                depth += 1;
            }
            ')' | ']' | '}' => {
                has_code = true;
                depth -= 1;
            }
            c if c.is_whitespace() => {}
            _ => has_code = true,
        }
    }
    Scan { depth, has_code }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_names_and_comments_do_not_count() {
        assert_eq!(scan("update ( 'a(' -> text \")(\" )").depth, 0);
        assert_eq!(scan("update ( // (((\n").depth, 1);
        assert_eq!(scan("update ( /* ) */").depth, 1);
        assert_eq!(scan("update ( 'it\\'s (' ").depth, 1);
        assert_eq!(scan("{\"get\": {\"path\": [").depth, 3);
        assert!(!scan("  // only a comment").has_code);
    }

    #[test]
    fn blocks_wait_for_balance_and_continuations() {
        let mut b = Blocks::default();
        assert_eq!(b.push("update ("), None);
        assert_eq!(b.push("  'Pulses' -> number 1"), None);
        assert_eq!(b.push(")").as_deref(), Some("update (\n  'Pulses' -> number 1\n)"));
        assert_eq!(b.push("collection select . 'Orders' \\"), None);
        assert_eq!(
            b.push("  'Qty' -> number : 'Quantity'").as_deref(),
            Some("collection select . 'Orders' \n  'Qty' -> number : 'Quantity'")
        );
        assert_eq!(b.push(""), None);
        assert_eq!(b.push("// comment"), None);
        assert!(b.is_empty());
        assert_eq!(b.push(".schema").as_deref(), Some(".schema"));
        assert_eq!(b.push("get ("), None);
        assert_eq!(b.finish().as_deref(), Some("get ("));
    }
}
