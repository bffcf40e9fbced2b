//! The OO7 schema's properties and states, resolved by name once.

use espalier_schema::{NodeTypeId, PropertyId, PropertyKind, Schema, StateIndex, ROOT};

use crate::LoadError;

/// The properties, states and node types of `oo7.alan` that the loader and the traversals
/// written in the data API use.
#[derive(Debug, Clone)]
pub struct Props {
    /// The root's `'Modules'` dictionary.
    pub modules: PropertyId,
    /// A module's `'Id'`.
    pub module_id: PropertyId,
    /// A module's `'Type'`.
    pub module_type: PropertyId,
    /// A module's `'Build Date'`.
    pub module_build_date: PropertyId,
    /// A module's `'Manual'` group.
    pub manual: PropertyId,
    /// The manual's `'Title'`.
    pub manual_title: PropertyId,
    /// The manual's `'Id'`.
    pub manual_id: PropertyId,
    /// The manual's `'Text'` (T8, T9).
    pub manual_text: PropertyId,
    /// The manual's `'Text Length'`.
    pub manual_len: PropertyId,
    /// A module's `'Assemblies'` dictionary.
    pub assemblies: PropertyId,
    /// The node type of an assembly.
    pub assembly_type: NodeTypeId,
    /// An assembly's `'Id'`.
    pub asm_id: PropertyId,
    /// An assembly's `'Type'`.
    pub asm_type: PropertyId,
    /// An assembly's `'Build Date'`.
    pub asm_build_date: PropertyId,
    /// An assembly's `'Kind'` stategroup: base or complex.
    pub kind: PropertyId,
    /// The `'Base'` state of `'Kind'`.
    pub base: StateIndex,
    /// The `'Complex'` state of `'Kind'`.
    pub complex: StateIndex,
    /// A base assembly's `'Components Private'` matrix of composite parts.
    pub private: PropertyId,
    /// A base assembly's `'Components Shared'` matrix of composite parts.
    pub shared: PropertyId,
    /// A complex assembly's `'Sub Assemblies'` matrix.
    pub subs: PropertyId,
    /// A module's `'Design Root'`: the assembly at the top of the hierarchy.
    pub design_root: PropertyId,
    /// The root's `'Composite Parts'` dictionary: the design library.
    pub composite_parts: PropertyId,
    /// The node type of a composite part.
    pub composite_type: NodeTypeId,
    /// A composite part's `'Id'`.
    pub cp_id: PropertyId,
    /// A composite part's `'Type'`.
    pub cp_type: PropertyId,
    /// A composite part's `'Build Date'`.
    pub cp_build_date: PropertyId,
    /// A composite part's `'Atomic Parts'` dictionary.
    pub atomic_parts: PropertyId,
    /// The node type of an atomic part.
    pub atomic_type: NodeTypeId,
    /// An atomic part's `'Id'`.
    pub ap_id: PropertyId,
    /// An atomic part's `'Type'`.
    pub ap_type: PropertyId,
    /// An atomic part's `'Build Date'` (T3 updates it).
    pub ap_build_date: PropertyId,
    /// An atomic part's `'X'`.
    pub x: PropertyId,
    /// An atomic part's `'Y'`.
    pub y: PropertyId,
    /// An atomic part's `'Doc Id'` (Q8).
    pub doc_id: PropertyId,
    /// An atomic part's `'To'` matrix: its connections.
    pub to: PropertyId,
    /// A connection's `'Type'`.
    pub conn_type: PropertyId,
    /// A connection's `'Length'`.
    pub length: PropertyId,
    /// A composite part's `'Root Part'` reference.
    pub root_part: PropertyId,
    /// The root's `'Documents'` dictionary, keyed by title.
    pub documents: PropertyId,
    /// A document's `'Id'`.
    pub doc_id_of_doc: PropertyId,
    /// A document's `'Text'`.
    pub doc_text: PropertyId,
    /// A document's `'Part'` reference to its composite part.
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
