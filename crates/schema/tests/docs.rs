//! docs/schema-language.md stays true to the code: its examples compile (or fail) as shown.

use espalier_schema::*;

fn doc() -> String {
    let path = format!("{}/../../docs/schema-language.md", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced code blocks of the document, in order.
fn blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("```") {
            match cur.take() {
                Some(b) => out.push(b),
                None => cur = Some(String::new()),
            }
        } else if let Some(b) = cur.as_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    out
}

#[test]
fn the_example_compiles() {
    let text = doc();
    let example = blocks(&text).into_iter().next().expect("example block");
    let s = compile(&example).unwrap_or_else(|e| panic!("{}", e.render(&example, "doc")));
    assert_eq!(s.commands.len(), 1);
    assert_eq!(s.indexes.len(), 1);
    let machines = s.find(
        s.find(espalier_schema::ROOT, "Company Property").map(|p| p.id).and_then(|p| s.child_node(p)).expect("g"),
        "Machines",
    );
    assert!(machines.is_some());
}

#[test]
fn the_index_examples_compile() {
    let text = doc();
    let indexes = blocks(&text).into_iter().find(|b| b.starts_with("index ")).expect("index block");
    let model = std::fs::read_to_string(format!("{}/tests/models/commands_indexes.alan", env!("CARGO_MANIFEST_DIR")))
        .expect("model");
    let root_only = &model[..model.find("\ncommand").expect("commands")];
    let src = format!("{root_only}\n{indexes}");
    let s = compile(&src).unwrap_or_else(|e| panic!("{}", e.render(&src, "doc")));
    assert_eq!(s.indexes.len(), 3);
}

#[test]
fn the_rendered_error_is_what_compile_prints() {
    let text = doc();
    let shown = blocks(&text).into_iter().find(|b| b.starts_with("shop.alan:")).expect("rendered error block");
    let src = "root (\n    'Clients' -> dictionary ( )\n    'r' -> reference ( . 'Client' )\n)";
    let Err(d) = compile(src) else { panic!("should fail") };
    assert_eq!(d.render(src, "shop.alan"), shown);
}
