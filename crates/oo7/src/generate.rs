//! The seeded generator, by the paper's rules (§3): composite parts with a document each and
//! a graph of atomic parts (a ring for connectivity, then random connections up to the
//! fanout), build dates in the paper's ranges (atomic parts and assemblies 1000–1999; one
//! composite part in ten "young", 2000–2999, the others "old", 0–999), base assemblies with
//! three private and three shared composite parts chosen at random from the library, and
//! complex assemblies three to a level up to the design root. The same seed and parameters
//! give the same database (SplitMix64, fixed by its definition, as the benchmark language's
//! data sets).
//!
//! Where the paper leaves a choice: an atomic part's connections go to distinct other atomic
//! parts (a matrix holds one link per target); an atomic part's `docId` is drawn from 1 to
//! 1.25 × the number of composite parts, so about a fifth of the atomic parts name no document
//! and Q8 has something to leave out; ids are dense from 1 in each extent.

use espalier_bench::suite::SplitMix;

use crate::model::{
    title, Assembly, AtomicPart, CompositePart, Connection, Document, Manual, Module, Oo7, Params, Shape, Size,
};

/// Parameters the generator cannot build.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The fanout is zero or not below the number of atomic parts per composite part (a
    /// connection's target is another atomic part, never repeated).
    #[error("an atomic-part fanout of {fanout} needs more than {atomic} atomic parts per composite part (use 1 to {max})", max = atomic - 1)]
    Fanout {
        /// The connections asked for per atomic part.
        fanout: usize,
        /// The atomic parts per composite part.
        atomic: usize,
    },
    /// The parameters give no composite parts, assembly levels or assemblies.
    #[error("the parameters make an empty database: {0}")]
    Empty(&'static str),
}

/// The paper's date ranges and young fraction.
const MIN_ATOMIC_DATE: i64 = 1000;
const MIN_ASSM_DATE: i64 = 1000;
const MIN_YOUNG_COMP_DATE: i64 = 2000;
const MIN_OLD_COMP_DATE: i64 = 0;
const DATE_SPAN: u64 = 1000;
const YOUNG_COMP_FRAC: u64 = 10;

struct Rng(SplitMix);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0.below(bound.max(1))
    }

    fn date(&mut self, from: i64) -> i64 {
        from + self.below(DATE_SPAN) as i64
    }

    fn kind(&mut self) -> String {
        format!("type{:03}", self.below(1000))
    }
}

fn repeated(sentence: &str, size: usize) -> String {
    let mut text = String::with_capacity(size + sentence.len());
    while text.len() < size {
        text.push_str(sentence);
    }
    // The sentences are ASCII: any cut is at a character boundary.
    text.truncate(size);
    text
}

/// A document's text: its sentence repeated to the document size (as the paper's own code).
pub fn document_text(id: u64, size: usize) -> String {
    repeated(&format!("I am the documentation for composite part {id}. "), size)
}

/// Generates the configuration `size` at atomic-part fanout `fanout` from `seed`.
pub fn generate(size: Size, fanout: usize, seed: u64) -> Result<Oo7, GenerateError> {
    generate_params(size.params(fanout), seed)
}

/// Generates a database of any parameters from `seed`.
pub fn generate_params(params: Params, seed: u64) -> Result<Oo7, GenerateError> {
    check(&params)?;
    let mut rng = Rng(SplitMix::new(seed));
    let mut next_atom = 1;
    let mut composites = Vec::with_capacity(params.comp_per_module);
    let mut documents = Vec::with_capacity(params.comp_per_module);
    for id in 1..=params.comp_per_module as u64 {
        let (part, doc) = composite(&params, &mut rng, id, &mut next_atom);
        composites.push(part);
        documents.push(doc);
    }
    let comps = params.comp_per_module as u64;
    let mut assemblies = Vec::new();
    let mut level = Vec::new();
    let bases = (params.assm_per_assm as u64).pow(params.assm_levels - 1);
    let pick = |rng: &mut Rng| {
        let mut chosen = Vec::with_capacity(params.comp_per_assm);
        while chosen.len() < params.comp_per_assm.min(params.comp_per_module) {
            let c = rng.below(comps) + 1;
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        chosen
    };
    for id in 1..=bases {
        let kind = rng.kind();
        let build_date = rng.date(MIN_ASSM_DATE);
        let private = pick(&mut rng);
        let shared = pick(&mut rng);
        assemblies.push(Assembly { id, kind, build_date, shape: Shape::Base { private, shared } });
        level.push(id);
    }
    let mut next = bases + 1;
    while level.len() > 1 {
        let mut up = Vec::with_capacity(level.len() / params.assm_per_assm + 1);
        for subs in level.chunks(params.assm_per_assm) {
            let kind = rng.kind();
            let build_date = rng.date(MIN_ASSM_DATE);
            assemblies.push(Assembly { id: next, kind, build_date, shape: Shape::Complex { subs: subs.to_vec() } });
            up.push(next);
            next += 1;
        }
        level = up;
    }
    let design_root = level.first().copied().ok_or(GenerateError::Empty("no assemblies"))?;
    let module = Module {
        id: 1,
        kind: rng.kind(),
        build_date: rng.date(MIN_ASSM_DATE),
        manual: Manual {
            id: 1,
            title: "Manual 00000001".into(),
            text: repeated("I am the manual for module 1. ", params.manual_size),
        },
        assemblies,
        design_root,
    };
    Ok(Oo7 { params, seed, module, composites, documents })
}

fn check(params: &Params) -> Result<(), GenerateError> {
    if params.conn_per_atomic == 0 || params.conn_per_atomic >= params.atomic_per_comp {
        return Err(GenerateError::Fanout { fanout: params.conn_per_atomic, atomic: params.atomic_per_comp.max(2) });
    }
    if params.comp_per_module == 0 || params.comp_per_assm == 0 {
        return Err(GenerateError::Empty("no composite parts"));
    }
    if params.assm_levels == 0 || params.assm_per_assm == 0 {
        return Err(GenerateError::Empty("no assembly levels"));
    }
    Ok(())
}

/// One composite part with its atomic parts (ids from `next_atom`) and its document.
fn composite(params: &Params, rng: &mut Rng, id: u64, next_atom: &mut u64) -> (CompositePart, Document) {
    let first = *next_atom;
    let n = params.atomic_per_comp as u64;
    *next_atom += n;
    let docs = params.comp_per_module as u64 + params.comp_per_module as u64 / 4;
    let mut atoms = Vec::with_capacity(params.atomic_per_comp);
    for i in 0..n {
        let me = first + i;
        // The ring first, so that every atomic part is reachable from the root part.
        let mut targets = vec![first + (i + 1) % n];
        while targets.len() < params.conn_per_atomic {
            let t = first + rng.below(n);
            if t != me && !targets.contains(&t) {
                targets.push(t);
            }
        }
        let to = targets
            .into_iter()
            .map(|to| Connection { to, kind: rng.kind(), length: rng.below(1000) as i64 + 1 })
            .collect();
        atoms.push(AtomicPart {
            id: me,
            kind: rng.kind(),
            build_date: rng.date(MIN_ATOMIC_DATE),
            x: rng.below(100_000) as i64,
            y: rng.below(100_000) as i64,
            doc_id: rng.below(docs) as i64 + 1,
            to,
        });
    }
    let young = rng.below(YOUNG_COMP_FRAC) == 0;
    let build_date = rng.date(if young { MIN_YOUNG_COMP_DATE } else { MIN_OLD_COMP_DATE });
    let part = CompositePart { id, kind: rng.kind(), build_date, root_part: first + rng.below(n), atoms };
    let doc = Document { id, title: title(id), text: document_text(id, params.document_size), part: id };
    (part, doc)
}

/// New composite parts for the structural insert (§5.4.1): `count` parts with ids from
/// `first_part` and atomic parts from `first_atom`, each with its document, and for each the
/// base assemblies (distinct, two per part so five parts reach ten) that will use it.
pub fn new_composites(
    db: &Oo7,
    seed: u64,
    first_part: u64,
    first_atom: u64,
    count: usize,
) -> Vec<(CompositePart, Document, Vec<u64>)> {
    let mut rng = Rng(SplitMix::new(seed));
    let bases: Vec<u64> = db.base_assemblies().map(|(a, _)| a.id).collect();
    let mut next_atom = first_atom;
    (0..count as u64)
        .map(|i| {
            let (part, doc) = composite(&db.params, &mut rng, first_part + i, &mut next_atom);
            let mut users: Vec<u64> = Vec::with_capacity(2);
            while users.len() < 2.min(bases.len()) {
                let b = bases[rng.below(bases.len() as u64) as usize];
                if !users.contains(&b) {
                    users.push(b);
                }
            }
            (part, doc, users)
        })
        .collect()
}
