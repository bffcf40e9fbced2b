//! Writes the seeds that are generated rather than copied (`fuzz/seed` runs it): the dump of
//! the demo database (for `dump_import`), its data as JSON instructions (for
//! `structured_decode`), and a small valid log and checkpoint (for the storage readers),
//! written by the storage engine itself.

use std::path::Path;

use espalier_fuzz::{demo_engine, scratch, DEMO_DATA};
use espalier_instruction::parse::{clear_spans, parse_instructions, ParseOptions};
use espalier_protocol::codec::compress;
use espalier_protocol::{Compression, Instruction};
use espalier_storage::log::LogReader;
use espalier_storage::tables::checkpoint;

fn write(corpus: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus.join(target);
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    std::fs::write(dir.join(name), bytes).expect("a seed");
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let engine = demo_engine("seeds", true);
    let snapshot = engine.database().snapshot().expect("a snapshot");
    let mut dump = Vec::new();
    espalier_data::export(&snapshot.graph(), snapshot.version().expect("its version"), &mut dump, &mut |_| {})
        .expect("the export");
    write(&corpus, "dump_import", "demo.json", &dump);

    for (i, instr) in
        parse_instructions(DEMO_DATA, ParseOptions::CLIENT).expect("the demo data").into_iter().enumerate()
    {
        let mut item = instr.item;
        clear_spans(&mut item);
        let mut json = vec![0u8];
        json.extend_from_slice(serde_json::to_string(&Instruction::from(&item)).expect("JSON").as_bytes());
        write(&corpus, "structured_decode", &format!("demo-data-{i}.json"), &json);
    }

    // The demo database's own log (its pre-zeroed tail cut off) and a checkpoint of it, as
    // the storage engine wrote them; and the same records and chunks in the targets' framed
    // form (mode byte 1), where the checksums are made by the target.
    let dir = scratch().join("seeds");
    drop(snapshot);
    for entry in std::fs::read_dir(dir.join("log")).expect("the log").flatten() {
        if !entry.file_name().to_string_lossy().ends_with(".log") {
            continue;
        }
        let bytes = std::fs::read(entry.path()).expect("a segment");
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| (i + 1).next_multiple_of(8));
        let mut seed = vec![0u8];
        seed.extend_from_slice(&bytes[..used.min(bytes.len())]);
        write(&corpus, "log_reader", "demo-segment", &seed);
    }
    let mut framed = vec![1u8, 0, 0, 0, 0];
    let mut reader = LogReader::open(&dir, 0).expect("the log");
    let mut first = true;
    while let Some(record) = reader.next_record().expect("a record") {
        if !first {
            framed.extend_from_slice(b"|~");
        }
        framed.push(if first { 0x80 } else { 0 });
        framed.extend_from_slice(record.payload);
        first = false;
    }
    write(&corpus, "log_reader", "demo-framed", &framed);

    engine.database().checkpoint().expect("a checkpoint");
    for entry in std::fs::read_dir(&dir).expect("the database").flatten() {
        if entry.file_name().to_string_lossy().ends_with(".ckpt") {
            let mut seed = vec![0u8];
            seed.extend_from_slice(&std::fs::read(entry.path()).expect("the checkpoint"));
            write(&corpus, "checkpoint_reader", "demo-checkpoint", &seed);
            let mut chunks: Vec<Vec<u8>> = Vec::new();
            let covered = checkpoint::read(&entry.path(), &mut |ops| {
                chunks.push(ops.to_vec());
                Ok(())
            })
            .expect("the checkpoint reads");
            let mut framed = vec![1u8, 0, 0, covered as u8];
            framed.extend_from_slice(&chunks.join(&b"|~"[..]));
            write(&corpus, "checkpoint_reader", "demo-framed", &framed);
        }
    }

    // recovery: a checkpoint after half of the demo data, then the log of the other half.
    let engine = demo_engine("seeds-recovery", false);
    let list = parse_instructions(DEMO_DATA, ParseOptions::CLIENT).expect("the demo data");
    let half = list.len() / 2;
    for (i, instr) in list.iter().enumerate() {
        if i == half {
            engine.database().checkpoint().expect("a checkpoint");
        }
        let plan = engine.check(&instr.item, Some(DEMO_DATA)).expect("the demo data checks");
        engine.run(&plan, &Default::default(), None).expect("the demo data loads");
    }
    let dir = scratch().join("seeds-recovery");
    let mut seed = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the database").flatten() {
        if entry.file_name().to_string_lossy().ends_with(".ckpt") {
            let mut chunks: Vec<Vec<u8>> = Vec::new();
            checkpoint::read(&entry.path(), &mut |ops| {
                chunks.push(ops.to_vec());
                Ok(())
            })
            .expect("the checkpoint reads");
            seed.extend_from_slice(&chunks.join(&b"|~"[..]));
        }
    }
    seed.extend_from_slice(b"|#");
    let mut reader = LogReader::open(&dir, 0).expect("the log");
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().expect("a record") {
        records.push(record.payload.to_vec());
    }
    seed.extend_from_slice(&records.join(&b"|~"[..]));
    write(&corpus, "recovery", "demo-half-checkpointed", &seed);

    // Protocol vectors compressed, as a compressing session receives them (binary frames;
    // the setting byte's bits 1-2 pick zstd or deflate, bit 0 MessagePack).
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/vectors");
    for (name, setting) in [("execute_instruction.json", 2u8), ("execute_text.msgpack", 5u8)] {
        let Ok(bytes) = std::fs::read(vectors.join(name)) else { continue };
        let algorithm = if setting >> 1 == 1 { Compression::Zstd } else { Compression::Deflate };
        let mut seed = vec![setting];
        seed.extend_from_slice(&compress(algorithm, &bytes).expect("compressed"));
        write(&corpus, "frame_codec", &format!("{name}.{algorithm}"), &seed);
    }
}
