//! The GraBaTs 2009 singleton query (seed 000, §3.3.1) on a generated Java model.
//!
//! The contest's query finds every type declaration with at least one method that is public
//! and static and returns an instance of that same type: the Singleton pattern. The seed ran
//! it on MoDisco models of the org.eclipse.jdt sources (4.9 million elements), which are not
//! available here; this module generates a model of the same shape from a seed — packages
//! holding type declarations holding method declarations, each method with its modifiers and
//! its return type (void, or a reference to a type declaration anywhere in the model) — and
//! counts the singletons with plain Rust over the generated model, independently of the query
//! engine, so that every reply can be checked against that count.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use espalier_instruction::{Engine, QueryResult};

use super::RemoteError;

/// The schema: the part of the JDT AST metamodel the query reads (seed 000, fig. 2).
pub const SCHEMA: &str = "root (
    'Packages' -> dictionary (
        'Types' -> dictionary (
            'Methods' -> dictionary (
                'Public' -> stategroup ( 'No' -> ( ) 'Yes' -> ( ) )
                'Static' -> stategroup ( 'No' -> ( ) 'Yes' -> ( ) )
                'Returns' -> stategroup (
                    'Void' -> ( )
                    'Type' -> ( 'Type' -> reference ( ?^ .^ .^ .^ . 'Packages' . 'Types' ) )
                )
            )
        )
    )
)";

/// The singleton query as one pattern query: the types, each once.
pub const QUERY: &str = "collection match
    type in . 'Packages' . 'Types'
    method in type . 'Methods'
    where method stategroup : 'Public' == 'Yes'
      and method stategroup : 'Static' == 'Yes'
      and method ? 'Returns' * 'Type' > 'Type' == type
select distinct 'type' -> type";

/// Type declarations per package.
const TYPES_PER_PACKAGE: usize = 50;
/// Most methods a type declaration gets (uniformly 0 to this).
const MAX_METHODS: usize = 10;
/// Most types a model may have.
pub const MAX_TYPES: usize = 10_000_000;

/// A method declaration: its modifiers and what it returns (`None`: void).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// `public`.
    pub public: bool,
    /// `static`.
    pub is_static: bool,
    /// The returned type, as (package, type) indexes; `None` for void.
    pub returns: Option<(usize, usize)>,
}

/// A generated Java model: packages of types of methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// `packages[p][t]` is type `t` of package `p`: its methods.
    pub packages: Vec<Vec<Vec<Method>>>,
}

impl Model {
    /// A model of `types` type declarations drawn from `seed`. About one method in eight is
    /// public and static; of those returning a type, a quarter return their own type, so
    /// about one type in twenty-five is a singleton.
    pub fn generate(types: usize, seed: u64) -> Result<Model, RemoteError> {
        if types == 0 || types > MAX_TYPES {
            return Err(RemoteError::Invalid(format!("--grabats-types: {types} is not between 1 and {MAX_TYPES}")));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let n_packages = types.div_ceil(TYPES_PER_PACKAGE);
        let mut packages = Vec::with_capacity(n_packages);
        for p in 0..n_packages {
            let n = TYPES_PER_PACKAGE.min(types - p * TYPES_PER_PACKAGE);
            let mut package = Vec::with_capacity(n);
            for t in 0..n {
                let methods = (0..rng.random_range(0..=MAX_METHODS))
                    .map(|_| Method {
                        public: rng.random_bool(0.5),
                        is_static: rng.random_bool(0.25),
                        returns: if rng.random_bool(0.4) {
                            None
                        } else if rng.random_bool(0.25) {
                            Some((p, t))
                        } else {
                            let other = rng.random_range(0..types);
                            Some((other / TYPES_PER_PACKAGE, other % TYPES_PER_PACKAGE))
                        },
                    })
                    .collect();
                package.push(methods);
            }
            packages.push(package);
        }
        Ok(Model { packages })
    }

    /// Type declarations in the model.
    pub fn types(&self) -> usize {
        self.packages.iter().map(Vec::len).sum()
    }

    /// Method declarations in the model.
    pub fn methods(&self) -> usize {
        self.packages.iter().flatten().map(Vec::len).sum()
    }

    /// The singletons, counted without the query engine: types with a public static method
    /// that returns the type itself.
    pub fn singletons(&self) -> usize {
        let mut n = 0;
        for (p, package) in self.packages.iter().enumerate() {
            for (t, methods) in package.iter().enumerate() {
                if methods.iter().any(|m| m.public && m.is_static && m.returns == Some((p, t))) {
                    n += 1;
                }
            }
        }
        n
    }

    /// Writes the model into `engine` (a database of [`SCHEMA`], empty): one update per
    /// package with every type and method, then one per package setting the returned types
    /// (a reference needs its target to exist). `progress` gets the packages done.
    pub fn fill(&self, engine: &Engine, progress: &mut dyn FnMut(usize)) -> Result<(), RemoteError> {
        let params = std::collections::HashMap::new();
        let run = |text: String| {
            engine
                .execute_text(&text, &params)
                .map(|_| ())
                .map_err(|e| RemoteError::espalier("loading the GraBaTs model", e))
        };
        for (p, package) in self.packages.iter().enumerate() {
            let mut text = format!("update ( 'Packages' -> dictionary \"{}\" (", package_key(p));
            for (t, methods) in package.iter().enumerate() {
                text.push_str(&format!(" 'Types' -> dictionary \"{}\" (", type_key(t)));
                for (m, method) in methods.iter().enumerate() {
                    text.push_str(&format!(
                        " 'Methods' -> dictionary \"m{m}\" ( 'Public' -> stategroup '{}' ( ) 'Static' -> stategroup '{}' ( ) )",
                        if method.public { "Yes" } else { "No" },
                        if method.is_static { "Yes" } else { "No" },
                    ));
                }
                text.push_str(" )");
            }
            text.push_str(" ) )");
            run(text)?;
            progress(p + 1);
        }
        for (p, package) in self.packages.iter().enumerate() {
            let mut text = format!("update . 'Packages' : \"{}\" (", package_key(p));
            let mut any = false;
            for (t, methods) in package.iter().enumerate() {
                let returning: Vec<(usize, (usize, usize))> =
                    methods.iter().enumerate().filter_map(|(m, method)| method.returns.map(|r| (m, r))).collect();
                if returning.is_empty() {
                    continue;
                }
                any = true;
                text.push_str(&format!(" 'Types' -> dictionary \"{}\" update (", type_key(t)));
                for (m, (rp, rt)) in returning {
                    text.push_str(&format!(
                        " 'Methods' -> dictionary \"m{m}\" update ( 'Returns' -> stategroup 'Type' set to ( 'Type' -> reference [ \"{}\", \"{}\" ] ) )",
                        package_key(rp),
                        type_key(rt)
                    ));
                }
                text.push_str(" )");
            }
            text.push_str(" )");
            if any {
                run(text)?;
            }
        }
        Ok(())
    }
}

fn package_key(p: usize) -> String {
    format!("org.example.p{p}")
}

fn type_key(t: usize) -> String {
    format!("T{t}")
}

/// Checks `rows`, [`QUERY`]'s result on the engine in process, against the model's own count
/// of singletons.
pub fn check(model: &Model, rows: &QueryResult) -> Result<(), RemoteError> {
    let expected = model.singletons();
    if rows.total != expected as u64 {
        return Err(RemoteError::Invalid(format!(
            "the GraBaTs query finds {} singletons in process, and counting the generated model finds {expected}",
            rows.total
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_transaction::{DatabaseOptions, Durability};

    #[test]
    fn the_generator_is_deterministic_and_the_query_finds_the_counted_singletons() {
        let a = Model::generate(120, 7).unwrap();
        assert_eq!(a, Model::generate(120, 7).unwrap());
        assert_ne!(a, Model::generate(120, 8).unwrap());
        assert_eq!(a.types(), 120);
        assert!(a.singletons() > 0 && a.singletons() < 120, "{} singletons", a.singletons());
        let dir = tempfile::tempdir().unwrap();
        let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
        let engine = Engine::create(dir.path(), SCHEMA, options).unwrap();
        let mut done = 0;
        a.fill(&engine, &mut |p| done = p).unwrap();
        assert_eq!(done, 3);
        let espalier_instruction::Reply::Query(rows) = engine.execute_text(QUERY, &Default::default()).unwrap() else {
            panic!("the query answers rows")
        };
        check(&a, &rows).unwrap();
        assert_eq!(rows.rows.len(), a.singletons());
        // A model that differs from the database is caught.
        let mut b = a.clone();
        let (p, t) = (0..3)
            .flat_map(|p| (0..40).map(move |t| (p, t)))
            .find(|&(p, t)| b.packages[p][t].iter().all(|m| !(m.public && m.is_static && m.returns == Some((p, t)))))
            .unwrap();
        b.packages[p][t].push(Method { public: true, is_static: true, returns: Some((p, t)) });
        assert!(check(&b, &rows).unwrap_err().to_string().contains("counting the generated model"));
        assert!(Model::generate(0, 1).is_err());
    }
}
