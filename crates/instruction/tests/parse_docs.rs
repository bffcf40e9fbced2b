//! Keeps docs/instructions.md true: every ```alan block parses, and the ```json block that
//! follows one decodes to the same instruction.

use espalier_instruction::parse::{clear_spans, parse_instruction, to_text, ParseOptions};
use espalier_protocol::parse_json;

const DOC: &str = include_str!("../../../docs/instructions.md");

/// (language, body) of every fenced block, in order.
fn fenced_blocks(doc: &str) -> Vec<(&str, String)> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else { continue };
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        blocks.push((lang.trim(), body.join("\n")));
    }
    blocks
}

#[test]
fn doc_examples_parse_and_match_their_json() {
    let blocks = fenced_blocks(DOC);
    let mut pairs = 0;
    for (i, (lang, body)) in blocks.iter().enumerate() {
        if *lang != "alan" {
            continue;
        }
        let mut text = parse_instruction(body, ParseOptions::CLIENT).unwrap_or_else(|e| panic!("{e}\n{body}"));
        clear_spans(&mut text);
        let mut again = parse_instruction(&to_text(&text), ParseOptions::CLIENT).unwrap();
        clear_spans(&mut again);
        assert_eq!(again, text, "{body}");
        if let Some(("json", json)) = blocks.get(i + 1).map(|(l, b)| (*l, b)) {
            let from_json = parse_json(json).unwrap_or_else(|e| panic!("{e}\n{json}"));
            assert_eq!(from_json, text, "{body}\n{json}");
            // The JSON shown is exactly what the protocol's wire form encodes, so clients can
            // copy it.
            let wire = espalier_protocol::Instruction::from(&text);
            assert_eq!(&serde_json::to_string_pretty(&wire).unwrap(), json, "{body}");
            pairs += 1;
        }
    }
    assert!(pairs >= 6, "only {pairs} text/JSON example pairs in docs/instructions.md");
}
