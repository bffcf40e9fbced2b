//! The protocol test vectors (`protocol/vectors/`): every message kind as JSON text and as
//! MessagePack bytes. This test checks, for every vector:
//!
//! 1. the JSON decodes into a `Message` equal to the one built here (the vector is current);
//! 2. that message encodes to exactly the `.msgpack` bytes (typed encoding);
//! 3. the JSON text transcoded field by field, in text order, to MessagePack gives the same
//!    bytes (what a client in another language does: parse the JSON, encode it);
//! 4. the `.msgpack` bytes decode to the same message, and it re-encodes to the same JSON value;
//! 5. the compressed frames in `frames/` decompress to their vector's bytes and decode;
//! 6. every invalid frame in `invalid/cases.json` is refused with its code.
//!
//! `ESPALIER_WRITE_VECTORS=1 cargo test -p espalier-protocol --test vectors` rewrites the files
//! from the messages below (after a deliberate protocol change).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use espalier_instruction::parse::{clear_spans, parse_instruction, ParseOptions};
use espalier_protocol::codec::{compress, decompress};
use espalier_protocol::{
    Change, Codec, Compression, Data, Encoding, ErrorCode, Frame, Kind, Limits, Message, NodePath, ParamValue,
    PathStep, QueryResult, Reply, Role, Row,
};
use serde_json::json;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol/vectors")
}

fn params(pairs: &[(&str, ParamValue)]) -> Option<BTreeMap<String, ParamValue>> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

fn text(s: &str) -> ParamValue {
    ParamValue::Text(s.into())
}

fn entry(collection: &str, key: &str) -> PathStep {
    PathStep::Entry { collection: collection.into(), key: vec![key.into()], matrix: false }
}

fn instr(src: &str) -> espalier_instruction::ast::Instruction {
    let mut i = parse_instruction(src, ParseOptions::CLIENT).expect("vector instruction parses");
    // The wire form carries no source positions.
    clear_spans(&mut i);
    i
}

fn orders_result() -> QueryResult {
    QueryResult {
        total: 3,
        columns: vec!["Quantity".into(), "Client".into(), "Status".into()],
        rows: vec![
            Row { key: vec!["o1".into()], values: vec![json!(500), json!("c1"), json!("Started")] },
            Row { key: vec!["o2".into()], values: vec![json!(-3), json!("c2"), json!("Planned")] },
        ],
    }
}

fn limits() -> Limits {
    Limits {
        max_frame_bytes: 16 << 20,
        max_in_flight: 64,
        max_query_ms: 30_000,
        max_result_bytes: 64 << 20,
        max_subscriptions: 256,
    }
}

fn machine_node() -> serde_json::Value {
    json!({
        "Costs per Hour": 120,
        "Current Task": {"Selected": {"Current Order": "o1", "Status": {"Started": {"Iteration": 7, "Starting Time": 1700000000}}}},
        "Pulses": 42
    })
}

/// Every vector: its file name (without extension) and message.
fn vectors() -> Vec<(&'static str, Message)> {
    let machine = NodePath(vec![entry("Machines", "M1")]);
    let order = NodePath(vec![entry("Orders", "o1")]);
    let all_changes = vec![
        Change::Number { node: machine.clone(), property: "Pulses".into(), old: 41, new: 42 },
        Change::Number { node: order.clone(), property: "Quantity".into(), old: -5, new: 300 },
        Change::Text { node: order.clone(), property: "Note".into(), old: String::new(), new: "rush \"now\"".into() },
        Change::Reference {
            node: NodePath(vec![
                entry("Machines", "M1"),
                PathStep::State { stategroup: "Current Task".into(), state: "Selected".into() },
            ]),
            property: "Current Order".into(),
            old: None,
            new: vec!["o1".into()],
        },
        Change::Reference {
            node: order.clone(),
            property: "Client".into(),
            old: Some(vec!["c1".into()]),
            new: vec!["c2".into()],
        },
        Change::EntryAdded { node: order.clone(), collection: "Lines".into(), key: vec!["frame".into()] },
        Change::EntryRemoved { node: NodePath(vec![]), collection: "Orders".into(), key: vec!["o9".into()] },
        Change::StateSwitched {
            node: NodePath(vec![entry("Orders", "o1"), PathStep::Group("Planning".into())]),
            stategroup: "Status".into(),
            old: "Planned".into(),
            new: "Started".into(),
        },
    ];
    vec![
        // Client → server.
        ("ping", Message::ping(1)),
        (
            "execute_text",
            Message::execute_text(
                2,
                "update . 'Machines' : $machine ( 'Pulses' -> number + 1 )",
                params(&[("machine", text("M1"))]),
            ),
        ),
        (
            "execute_query_text",
            Message::execute_text(
                3,
                "collection select . 'Orders' 'Quantity' -> number : 'Quantity' > $min 'Client' -> reference : 'Client'",
                params(&[("min", ParamValue::Int(10))]),
            ),
        ),
        (
            "execute_instruction",
            Message::execute(
                4,
                instr("update . 'Orders' : \"o1\" ( 'Quantity' -> number -5 'Status' -> stategroup 'Started' set to ( 'Phase' -> number 1 ) )"),
                None,
            ),
        ),
        (
            "execute_command",
            Message::execute(5, instr("command 'pulse' ( 'machine' -> \"M1\" )"), None),
        ),
        (
            "execute_transaction",
            Message::execute_text(
                6,
                "transaction ( update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 ), get . 'Machines' : \"M1\" )",
                None,
            ),
        ),
        ("get", Message::get(7, ". 'Machines' : $m", params(&[("m", text("M1"))]))),
        ("get_root", Message::get(8, "", None)),
        ("subscribe_node", Message::subscribe_node(9, ". 'Machines' : \"M1\"", None, None)),
        ("subscribe_node_since", Message::subscribe_node(10, ". 'Machines' : \"M1\"", None, Some(41))),
        (
            "subscribe_query",
            Message::subscribe_query(
                11,
                "collection select . 'Orders' 'Quantity' -> number : 'Quantity' 'Client' -> reference : 'Client' 'Status' -> stategroup : 'Status'",
                None,
                None,
            ),
        ),
        ("unsubscribe", Message::unsubscribe(12, 1)),
        ("status", Message::status_request(13)),
        ("shutdown", Message::shutdown(14)),
        // Server → client.
        (
            "welcome",
            // A fixed server string, so the vector does not change with the crate version.
            Message {
                server: Some("espalier 0.1.0".into()),
                ..Message::welcome(41, Role::Write, Encoding::Msgpack, Compression::Zstd, 512, limits())
            },
        ),
        ("pong", Message::pong(1)),
        ("result_done", Message::result(Some(2), Reply::Done { version: 42, changes: 1 })),
        ("result_query", Message::result(Some(3), Reply::Query(orders_result()))),
        (
            "result_transaction",
            Message::result(
                Some(6),
                Reply::Transaction(vec![Reply::Done { version: 43, changes: 1 }, Reply::Node(machine_node())]),
            ),
        ),
        ("node", Message::node(Some(7), 43, machine_node())),
        ("subscribed_node", Message::subscribed(9, 1, 43, false, Data::Node(machine_node()))),
        ("subscribed_resumed", Message::subscribed(10, 2, 41, true, Data::None)),
        ("subscribed_query", Message::subscribed(11, 3, 43, false, Data::Query(orders_result()))),
        ("notify_changes", Message::notify_changes(1, 44, all_changes)),
        ("notify_query", Message::notify_query(3, 45, orders_result())),
        (
            "notify_matches",
            Message::notify_matches(
                4,
                46,
                vec![vec![serde_json::json!("r1"), serde_json::json!(["1", "s2"])]],
                vec![vec![serde_json::json!("r2"), serde_json::json!(["1", "s2"])], vec![serde_json::json!("r3"), serde_json::json!(["2", "s1"])]],
            ),
        ),
        ("reload", Message::reload(1, 1050, "lagged", Data::Node(machine_node()))),
        ("unsubscribed", Message::unsubscribed(12, 1)),
        ("status_reply", Message::status(Some(13), 45, 3, 7, 12)),
        ("ok", Message::ok(Some(14))),
        (
            "error_instruction",
            Message::error(
                Some(4),
                ErrorCode::Referenced,
                "cannot remove . 'Clients' : \"c1\": . 'Orders' : \"o1\" refers to it through 'Client'",
            ),
        ),
        (
            "error_limit",
            Message::error(Some(15), ErrorCode::TooManyRequests, "more than 64 requests in flight on this session"),
        ),
        (
            "error_no_id",
            Message::error(None, ErrorCode::BadFrame, "the json message is malformed: EOF while parsing an object at line 1 column 9"),
        ),
        (
            "error_subscription",
            Message::subscription_error(3, ErrorCode::ResultTooLarge, "the reply is 70000000 bytes, over the limit of 67108864 bytes"),
        ),
    ]
}

fn json_text(m: &Message) -> String {
    let mut s = serde_json::to_string_pretty(m).expect("encodes");
    s.push('\n');
    s
}

fn msgpack(m: &Message) -> Vec<u8> {
    rmp_serde::to_vec_named(m).expect("encodes")
}

/// What a client in another language does: parse the JSON text and write each value as
/// MessagePack, keeping the order of the text.
fn transcode(json: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(json);
    let mut ser = rmp_serde::Serializer::new(&mut out).with_struct_map();
    serde_transcode::transcode(&mut de, &mut ser).expect("transcodes");
    out
}

/// Compressed frames of some vectors (`frames/<name>.zstd`, `frames/<name>.zlib`).
const FRAMED: [&str; 2] = ["result_query", "notify_changes"];

fn write_all() {
    let dir = dir();
    std::fs::create_dir_all(dir.join("frames")).unwrap();
    for (name, m) in vectors() {
        std::fs::write(dir.join(format!("{name}.json")), json_text(&m)).unwrap();
        std::fs::write(dir.join(format!("{name}.msgpack")), msgpack(&m)).unwrap();
    }
    let all = vectors();
    for name in FRAMED {
        let m = &all.iter().find(|(n, _)| *n == name).unwrap().1;
        let bytes = msgpack(m);
        std::fs::write(dir.join(format!("frames/{name}.zstd")), compress(Compression::Zstd, &bytes).unwrap()).unwrap();
        std::fs::write(dir.join(format!("frames/{name}.zlib")), compress(Compression::Deflate, &bytes).unwrap())
            .unwrap();
    }
}

#[test]
fn every_vector_reads_and_writes_byte_for_byte() {
    if std::env::var_os("ESPALIER_WRITE_VECTORS").is_some() {
        write_all();
    }
    let dir = dir();
    let mut problems = Vec::new();
    for (name, expected) in vectors() {
        let json_path = dir.join(format!("{name}.json"));
        let mp_path = dir.join(format!("{name}.msgpack"));
        let (Ok(json), Ok(bytes)) = (std::fs::read_to_string(&json_path), std::fs::read(&mp_path)) else {
            problems.push(format!("{name}: missing {} or {}", json_path.display(), mp_path.display()));
            continue;
        };
        let decoded: Message = match serde_json::from_str(&json) {
            Ok(m) => m,
            Err(e) => {
                problems.push(format!("{name}.json does not decode: {e}"));
                continue;
            }
        };
        if decoded != expected {
            problems.push(format!("{name}.json is stale: decodes to {decoded:?}, the model builds {expected:?}"));
        }
        if msgpack(&decoded) != bytes {
            problems.push(format!("{name}: the message encodes to other MessagePack bytes than {name}.msgpack"));
        }
        if transcode(&json) != bytes {
            problems.push(format!("{name}: {name}.json transcoded in text order differs from {name}.msgpack"));
        }
        match rmp_serde::from_slice::<Message>(&bytes) {
            Ok(m) if m == decoded => {}
            Ok(m) => problems.push(format!("{name}.msgpack decodes to {m:?}")),
            Err(e) => problems.push(format!("{name}.msgpack does not decode: {e}")),
        }
        let reencoded = serde_json::to_value(&decoded).unwrap();
        let original: serde_json::Value = serde_json::from_str(&json).unwrap();
        if reencoded != original {
            problems.push(format!("{name}: JSON round trip changes the value"));
        }
        // Through the session codecs, with and without compression.
        for (encoding, compression) in [
            (Encoding::Json, Compression::None),
            (Encoding::Msgpack, Compression::None),
            (Encoding::Json, Compression::Zstd),
            (Encoding::Msgpack, Compression::Deflate),
        ] {
            let codec = Codec::new(encoding, compression, 64, 1 << 20);
            let frame = codec.encode(&decoded).unwrap();
            match codec.decode(&frame) {
                Ok(m) if m == decoded => {}
                other => problems.push(format!("{name}: {encoding}/{compression} round trip gives {other:?}")),
            }
        }
    }
    assert!(problems.is_empty(), "vector problems:\n{}", problems.join("\n"));
}

#[test]
fn every_kind_has_a_vector() {
    let all = vectors();
    for kind in Kind::ALL {
        assert!(all.iter().any(|(_, m)| m.kind == kind), "no vector of kind {kind}");
    }
    let names: Vec<_> = all.iter().map(|(n, _)| *n).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "vector names are unique");
    // No stray files: every file in the directory belongs to a vector.
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let Some(ext) = path.extension().and_then(|e| e.to_str()) else { continue };
        if ext == "json" || ext == "msgpack" {
            let stem = path.file_stem().unwrap().to_str().unwrap();
            assert!(names.contains(&stem), "{} is not a vector of this test", path.display());
        }
    }
}

#[test]
fn compressed_frames_decompress_to_their_vectors() {
    let dir = dir();
    for name in FRAMED {
        let bytes = std::fs::read(dir.join(format!("{name}.msgpack"))).unwrap();
        let expected: Message = rmp_serde::from_slice(&bytes).unwrap();
        for (ext, algorithm) in [("zstd", Compression::Zstd), ("zlib", Compression::Deflate)] {
            let frame = std::fs::read(dir.join(format!("frames/{name}.{ext}"))).unwrap();
            assert_eq!(espalier_protocol::codec::compressed_by(&frame), Some(algorithm), "{name}.{ext} magic");
            assert_eq!(decompress(algorithm, &frame, 1 << 20).unwrap(), bytes, "{name}.{ext}");
            let codec = Codec::new(Encoding::Msgpack, algorithm, 0, 1 << 20);
            assert_eq!(codec.decode(&Frame::Binary(frame)).unwrap(), expected);
        }
    }
}

#[derive(serde::Deserialize)]
struct InvalidCase {
    name: String,
    encoding: Encoding,
    compression: Compression,
    /// `text` or `binary`.
    frame: String,
    /// The frame's payload: `text` as is, or `hex` bytes.
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    hex: Option<String>,
    code: ErrorCode,
    /// The id the error reply carries, if the frame still shows one.
    #[serde(default)]
    id: Option<u64>,
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn invalid_frames_are_refused_with_their_codes() {
    let cases: Vec<InvalidCase> =
        serde_json::from_str(&std::fs::read_to_string(dir().join("invalid/cases.json")).unwrap()).unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let codec = Codec::new(case.encoding, case.compression, 512, 4096);
        let frame = match case.frame.as_str() {
            "text" => Frame::Text(case.text.clone().expect("text payload")),
            "binary" => Frame::Binary(unhex(case.hex.as_deref().expect("hex payload"))),
            other => panic!("{}: frame {other}", case.name),
        };
        let (code, id) = match codec.decode(&frame) {
            Ok(m) => {
                let id = m.id;
                match m.into_request() {
                    Ok(r) => panic!("{}: accepted as {r:?}", case.name),
                    Err(e) => (e.code, id),
                }
            }
            Err(u) => (u.error.code(), u.id),
        };
        assert_eq!(code, case.code, "{}", case.name);
        if case.id.is_some() {
            assert_eq!(id, case.id, "{}: id of the error", case.name);
        }
    }
}
