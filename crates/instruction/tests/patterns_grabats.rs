//! The GraBaTs 2009 singleton query (seed 000, §3.3.1): type declarations with a public,
//! static method that returns the type itself — written two ways (from the types with
//! nested `exists`, and from the methods upwards, Hawk's HQ3 shape), on generated Java-like
//! models whose singletons are computed in plain Rust, and on a hand-built one.

use std::collections::{BTreeSet, HashMap};

use espalier_instruction::{Engine, Reply};

mod common;
use common::{engine, Rng};

/// The JDT AST excerpt the query needs (Fig. 2): type declarations, their body
/// declarations (fields and methods), a method's modifiers and return type.
const SCHEMA: &str = r#"
root (
    'Type Declarations' -> dictionary (
        'Name' -> text
        'Body Declarations' -> dictionary (
            'Kind' -> stategroup (
                'Field' -> ( 'Type Name' -> text )
                'Method' -> (
                    'Modifiers' -> dictionary (
                        'Keyword' -> stategroup ( 'public' -> ( ) 'private' -> ( ) 'static' -> ( ) 'final' -> ( ) )
                    )
                    'Return Type' -> stategroup (
                        'Void' -> ( )
                        'Primitive' -> ( 'Name' -> text )
                        'Simple' -> ( 'Name' -> text )
                    )
                )
            )
        )
    )
)
"#;

const FROM_TYPES: &str = "collection match
    td in . 'Type Declarations'
    where exists (
        md in td . 'Body Declarations' ? 'Kind' * 'Method'
        where md ? 'Return Type' * 'Simple' text : 'Name' == td text : 'Name'
          and exists ( m in md . 'Modifiers' where m stategroup : 'Keyword' == 'public' )
          and exists ( m in md . 'Modifiers' where m stategroup : 'Keyword' == 'static' )
    )
select 'type' -> td";

const FROM_METHODS: &str = "collection match
    md in . 'Type Declarations' . 'Body Declarations' ? 'Kind' * 'Method'
    td in md ?^ .^
    where md ? 'Return Type' * 'Simple' text : 'Name' == td text : 'Name'
      and exists ( m in md . 'Modifiers' where m stategroup : 'Keyword' == 'public' )
      and exists ( m in md . 'Modifiers' where m stategroup : 'Keyword' == 'static' )
select distinct 'type' -> td";

enum Returns {
    Void,
    Primitive,
    Simple(String),
}

struct Method {
    modifiers: Vec<&'static str>,
    returns: Returns,
}

fn add_type(e: &Engine, name: &str, methods: &[Method], fields: usize) {
    let mut body = String::new();
    for f in 0..fields {
        body.push_str(&format!(
            " 'Body Declarations' -> dictionary \"f{f}\" ( 'Kind' -> stategroup 'Field' set to ( 'Type Name' -> text \"int\" ) )"
        ));
    }
    for (i, m) in methods.iter().enumerate() {
        let mods: String = m
            .modifiers
            .iter()
            .enumerate()
            .map(|(j, k)| format!(" 'Modifiers' -> dictionary \"{j}\" ( 'Keyword' -> stategroup '{k}' ( ) )"))
            .collect();
        let ret = match &m.returns {
            Returns::Void => "'Void' ( )".to_string(),
            Returns::Primitive => "'Primitive' ( 'Name' -> text \"int\" )".to_string(),
            Returns::Simple(n) => format!("'Simple' ( 'Name' -> text \"{n}\" )"),
        };
        body.push_str(&format!(
            " 'Body Declarations' -> dictionary \"m{i}\" ( 'Kind' -> stategroup 'Method' set to ({mods} 'Return Type' -> stategroup {ret} ) )"
        ));
    }
    let text = format!("update ( 'Type Declarations' -> dictionary \"{name}\" ( 'Name' -> text \"{name}\"{body} ) )");
    e.execute_text(&text, &HashMap::new()).unwrap_or_else(|err| panic!("{text}\n{err}"));
}

fn types(e: &Engine, query: &str) -> BTreeSet<String> {
    match e.execute_text(query, &HashMap::new()).unwrap() {
        Reply::Query(q) => q.rows.into_iter().map(|r| r.values[0].as_str().unwrap().to_string()).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hand_built_singletons() {
    let (_d, e) = engine(SCHEMA);
    let m = |modifiers: Vec<&'static str>, returns| Method { modifiers, returns };
    // A singleton; a static public method returning another type; public but not static;
    // a static public method returning a primitive; and a singleton with extra modifiers.
    add_type(&e, "Config", &[m(vec!["public", "static"], Returns::Simple("Config".into()))], 1);
    add_type(&e, "Factory", &[m(vec!["public", "static"], Returns::Simple("Config".into()))], 0);
    add_type(&e, "Bean", &[m(vec!["public"], Returns::Simple("Bean".into()))], 2);
    add_type(&e, "Counter", &[m(vec!["static", "public"], Returns::Primitive), m(vec![], Returns::Void)], 0);
    add_type(&e, "Registry", &[m(vec!["final", "static", "public"], Returns::Simple("Registry".into()))], 0);
    let want: BTreeSet<String> = ["Config", "Registry"].into_iter().map(String::from).collect();
    assert_eq!(types(&e, FROM_TYPES), want);
    assert_eq!(types(&e, FROM_METHODS), want);
}

#[test]
fn generated_models_agree_with_a_direct_computation() {
    let mut rng = Rng(0x6AB_A75);
    let (_d, e) = engine(SCHEMA);
    let names: Vec<String> = (0..60).map(|i| format!("T{i}")).collect();
    let mut want = BTreeSet::new();
    for name in &names {
        let methods: Vec<Method> = (0..rng.below(4))
            .map(|_| {
                let modifiers: Vec<&'static str> =
                    ["public", "static", "private", "final"].into_iter().filter(|_| rng.below(2) == 0).collect();
                let returns = match rng.below(4) {
                    0 => Returns::Void,
                    1 => Returns::Primitive,
                    2 => Returns::Simple(name.clone()),
                    _ => Returns::Simple(names[rng.below(names.len() as u64) as usize].clone()),
                };
                Method { modifiers, returns }
            })
            .collect();
        let singleton = methods.iter().any(|m| {
            m.modifiers.contains(&"public")
                && m.modifiers.contains(&"static")
                && matches!(&m.returns, Returns::Simple(n) if n == name)
        });
        if singleton {
            want.insert(name.clone());
        }
        add_type(&e, name, &methods, rng.below(3) as usize);
    }
    assert!(want.len() >= 3 && want.len() < names.len() / 2, "a fair share are singletons: {want:?}");
    assert_eq!(types(&e, FROM_TYPES), want);
    assert_eq!(types(&e, FROM_METHODS), want);
}
