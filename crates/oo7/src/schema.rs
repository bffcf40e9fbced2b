//! The OO7 schema's properties and states, resolved by name once.

use espalier_schema::{NodeTypeId, PropertyId, PropertyKind, Schema, StateIndex, ROOT};

use crate::LoadError;

/// The properties, states and node types of `oo7.alan` that the loader and the traversals
/// written in the data API use.
#[derive(Debug, Clone)]
pub struct Props {
    pub modules: PropertyId,
    pub module_id: PropertyId,
    pub module_type: PropertyId,
    pub module_build_date: PropertyId,
    pub manual: PropertyId,
    pub manual_title: PropertyId,
    pub manual_id: PropertyId,
    pub manual_text: PropertyId,
    pub manual_len: PropertyId,
    pub assemblies: PropertyId,
    pub assembly_type: NodeTypeId,
    pub asm_id: PropertyId,
    pub asm_type: PropertyId,
    pub asm_build_date: PropertyId,
    pub kind: PropertyId,
    pub base: StateIndex,
    pub complex: StateIndex,
    pub private: PropertyId,
    pub shared: PropertyId,
    pub subs: PropertyId,
    pub design_root: PropertyId,
    pub composite_parts: PropertyId,
    pub composite_type: NodeTypeId,
    pub cp_id: PropertyId,
    pub cp_type: PropertyId,
    pub cp_build_date: PropertyId,
    pub atomic_parts: PropertyId,
    pub atomic_type: NodeTypeId,
    pub ap_id: PropertyId,
    pub ap_type: PropertyId,
    pub ap_build_date: PropertyId,
    pub x: PropertyId,
    pub y: PropertyId,
    pub doc_id: PropertyId,
    pub to: PropertyId,
    pub conn_type: PropertyId,
    pub length: PropertyId,
    pub root_part: PropertyId,
    pub documents: PropertyId,
    pub doc_id_of_doc: PropertyId,
    pub doc_text: PropertyId,
    pub part: PropertyId,
    /// The schema index of documents by id.
    pub document_id_index: u32,
}

fn find(schema: &Schema, ty: NodeTypeId, name: &str) -> Result<PropertyId, LoadError> {
    schema.find(ty, name).map(|p| p.id).ok_or_else(|| LoadError::Schema(format!("no property '{name}'")))
}

fn inner(schema: &Schema, p: PropertyId) -> Result<NodeTypeId, LoadError> {
    match &schema.property(p).kind {
        PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } | PropertyKind::Group { node } => {
            Ok(*node)
        }
        _ => Err(LoadError::Schema(format!("'{}' holds no node", schema.property(p).name))),
    }
}

fn state(schema: &Schema, p: PropertyId, name: &str) -> Result<(StateIndex, NodeTypeId), LoadError> {
    match &schema.property(p).kind {
        PropertyKind::StateGroup { states } => states
            .iter()
            .position(|s| s.name == name)
            .and_then(|i| Some((StateIndex::try_from(i).ok()?, states.get(i)?.node)))
            .ok_or_else(|| LoadError::Schema(format!("no state '{name}'"))),
        _ => Err(LoadError::Schema(format!("'{}' is not a stategroup", schema.property(p).name))),
    }
}

impl Props {
    /// Finds every property by name; fails if the schema is not OO7's.
    pub fn resolve(s: &Schema) -> Result<Props, LoadError> {
        let modules = find(s, ROOT, "Modules")?;
        let module = inner(s, modules)?;
        let manual = find(s, module, "Manual")?;
        let manual_ty = inner(s, manual)?;
        let assemblies = find(s, module, "Assemblies")?;
        let assembly = inner(s, assemblies)?;
        let kind = find(s, assembly, "Kind")?;
        let (base, base_ty) = state(s, kind, "Base")?;
        let (complex, complex_ty) = state(s, kind, "Complex")?;
        let composite_parts = find(s, ROOT, "Composite Parts")?;
        let composite = inner(s, composite_parts)?;
        let atomic_parts = find(s, composite, "Atomic Parts")?;
        let atomic = inner(s, atomic_parts)?;
        let to = find(s, atomic, "To")?;
        let connection = inner(s, to)?;
        let documents = find(s, ROOT, "Documents")?;
        let document = inner(s, documents)?;
        Ok(Props {
            modules,
            module_id: find(s, module, "Id")?,
            module_type: find(s, module, "Type")?,
            module_build_date: find(s, module, "Build Date")?,
            manual,
            manual_title: find(s, manual_ty, "Title")?,
            manual_id: find(s, manual_ty, "Id")?,
            manual_text: find(s, manual_ty, "Text")?,
            manual_len: find(s, manual_ty, "Text Length")?,
            assemblies,
            assembly_type: assembly,
            asm_id: find(s, assembly, "Id")?,
            asm_type: find(s, assembly, "Type")?,
            asm_build_date: find(s, assembly, "Build Date")?,
            kind,
            base,
            complex,
            private: find(s, base_ty, "Components Private")?,
            shared: find(s, base_ty, "Components Shared")?,
            subs: find(s, complex_ty, "Sub Assemblies")?,
            design_root: find(s, module, "Design Root")?,
            composite_parts,
            composite_type: composite,
            cp_id: find(s, composite, "Id")?,
            cp_type: find(s, composite, "Type")?,
            cp_build_date: find(s, composite, "Build Date")?,
            atomic_parts,
            atomic_type: atomic,
            ap_id: find(s, atomic, "Id")?,
            ap_type: find(s, atomic, "Type")?,
            ap_build_date: find(s, atomic, "Build Date")?,
            x: find(s, atomic, "X")?,
            y: find(s, atomic, "Y")?,
            doc_id: find(s, atomic, "Doc Id")?,
            to,
            conn_type: find(s, connection, "Type")?,
            length: find(s, connection, "Length")?,
            root_part: find(s, composite, "Root Part")?,
            documents,
            doc_id_of_doc: find(s, document, "Id")?,
            doc_text: find(s, document, "Text")?,
            part: find(s, document, "Part")?,
            document_id_index: s
                .indexes
                .iter()
                .position(|i| i.name == "Document Id")
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| LoadError::Schema("no index 'Document Id'".into()))?,
        })
    }
}
