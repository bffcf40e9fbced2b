//! Puts an OO7 database into Espalier, in one atomic request through the typed graph
//! (`WriteGraph`): modules with their manual and assemblies, composite parts with their
//! atomic parts and connections, documents. Keys are the objects' ids as text (documents:
//! their title).

use std::collections::HashMap;

use espalier_data::{EntryKey, NodeRef, WriteGraph};

use crate::model::{Oo7, Shape};
use crate::schema::Props;
use crate::LoadError;

/// Writes `db` into an empty OO7 database (inside `Database::write`).
pub fn write(g: &mut WriteGraph<'_, '_>, db: &Oo7) -> Result<(), LoadError> {
    let p = Props::resolve(g.schema)?;
    let root = NodeRef::ROOT;
    // A bulk load's change set would be as large as the database, and nobody reads it.
    g.set_record_changes(false);
    let mut parts: HashMap<u64, NodeRef> = HashMap::with_capacity(db.composites.len());
    for c in &db.composites {
        let cn = g.add_entry(root, p.composite_parts, EntryKey::Text(&c.id.to_string()))?;
        g.set_number(cn, p.cp_id, c.id as i64)?;
        g.set_text(cn, p.cp_type, &c.kind)?;
        g.set_number(cn, p.cp_build_date, c.build_date)?;
        let mut atoms: HashMap<u64, NodeRef> = HashMap::with_capacity(c.atoms.len());
        for a in &c.atoms {
            let an = g.add_entry(cn, p.atomic_parts, EntryKey::Text(&a.id.to_string()))?;
            g.set_number(an, p.ap_id, a.id as i64)?;
            g.set_text(an, p.ap_type, &a.kind)?;
            g.set_number(an, p.ap_build_date, a.build_date)?;
            g.set_number(an, p.x, a.x)?;
            g.set_number(an, p.y, a.y)?;
            g.set_number(an, p.doc_id, a.doc_id)?;
            atoms.insert(a.id, an);
        }
        let atom = |id: u64| atoms.get(&id).copied().ok_or(LoadError::Dangling("atomic part", id));
        for a in &c.atoms {
            let an = atom(a.id)?;
            for t in &a.to {
                let link = g.add_entry(an, p.to, EntryKey::Target(atom(t.to)?.id))?;
                g.set_text(link, p.conn_type, &t.kind)?;
                g.set_number(link, p.length, t.length)?;
            }
        }
        g.set_reference(cn, p.root_part, atom(c.root_part)?.id)?;
        parts.insert(c.id, cn);
    }
    let part = |id: u64| parts.get(&id).copied().ok_or(LoadError::Dangling("composite part", id));
    for d in &db.documents {
        let dn = g.add_entry(root, p.documents, EntryKey::Text(&d.title))?;
        g.set_number(dn, p.doc_id_of_doc, d.id as i64)?;
        g.set_text(dn, p.doc_text, &d.text)?;
        g.set_reference(dn, p.part, part(d.part)?.id)?;
    }
    let m = &db.module;
    let mn = g.add_entry(root, p.modules, EntryKey::Text(&m.id.to_string()))?;
    g.set_number(mn, p.module_id, m.id as i64)?;
    g.set_text(mn, p.module_type, &m.kind)?;
    g.set_number(mn, p.module_build_date, m.build_date)?;
    let manual = g.graph().group(mn, p.manual);
    g.set_text(manual, p.manual_title, &m.manual.title)?;
    g.set_number(manual, p.manual_id, m.manual.id as i64)?;
    g.set_text(manual, p.manual_text, &m.manual.text)?;
    g.set_number(manual, p.manual_len, m.manual.text.len() as i64)?;
    let mut asm: HashMap<u64, NodeRef> = HashMap::with_capacity(m.assemblies.len());
    for a in &m.assemblies {
        let an = g.add_entry(mn, p.assemblies, EntryKey::Text(&a.id.to_string()))?;
        g.set_number(an, p.asm_id, a.id as i64)?;
        g.set_text(an, p.asm_type, &a.kind)?;
        g.set_number(an, p.asm_build_date, a.build_date)?;
        asm.insert(a.id, an);
    }
    let assembly = |id: u64| asm.get(&id).copied().ok_or(LoadError::Dangling("assembly", id));
    for a in &m.assemblies {
        let an = assembly(a.id)?;
        match &a.shape {
            Shape::Base { private, shared } => {
                let base = choose(g, an, p.kind, p.base)?;
                for (matrix, list) in [(p.private, private), (p.shared, shared)] {
                    for c in list {
                        g.add_entry(base, matrix, EntryKey::Target(part(*c)?.id))?;
                    }
                }
            }
            Shape::Complex { subs } => {
                let complex = choose(g, an, p.kind, p.complex)?;
                for s in subs {
                    g.add_entry(complex, p.subs, EntryKey::Target(assembly(*s)?.id))?;
                }
            }
        }
    }
    g.set_reference(mn, p.design_root, assembly(m.design_root)?.id)?;
    g.set_record_changes(true);
    Ok(())
}

/// The node of state `want` of stategroup `property` of a new node, switching to it unless it
/// is the default (the first state) already.
fn choose(
    g: &mut WriteGraph<'_, '_>,
    node: NodeRef,
    property: espalier_schema::PropertyId,
    want: espalier_schema::StateIndex,
) -> Result<NodeRef, LoadError> {
    let (current, child) = g.graph().state(node, property)?;
    Ok(if current == want { child } else { g.switch_state(node, property, want)? })
}
