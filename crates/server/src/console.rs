//! The web console (`console/` in the repository, docs/console.md) and the endpoints it needs
//! that no instruction answers:
//!
//! - `GET /` and `GET /console/{file}`: the console's files, built from `console/src` by
//!   `console/build.mjs` into `crates/server/console-dist/` (committed, so building the
//!   server needs no npm) and embedded in the binary. No token is needed for them: the
//!   console signs in over the WebSocket like any client.
//! - `GET /console/session`: whether the server wants a token, and the role of the one given
//!   (always 200, so a browser logs no failed request while the console signs in).
//! - `GET /v1/schema`: the schema text and its compiled tree (node types, properties,
//!   reference targets, states, derived properties, commands, indexes).
//! - `GET /v1/entries`: one page of a collection's entries whose key starts with a prefix,
//!   with the total, as rows of their scalar properties (collection queries filter by
//!   property values, not by keys).
//! - `GET /v1/figures`: the server's counters ([`crate::figures`]).
//!
//! The three endpoints take a token like every `/v1/` endpoint and answer JSON.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use espalier_protocol::{Encoding, ErrorCode, RequestError};
use espalier_schema::{
    Aggregate, Derivation, IndexKind, NodeTypeId, Over, ParamKind, PropertyId, PropertyKind, Schema,
};
use serde_json::{json, Value};

use crate::exec;
use crate::fallback::error_reply;
use crate::shared::{http_admit, query_map, Shared};

/// The console's files: (name, content type, bytes).
const FILES: [(&str, &str, &[u8]); 3] = [
    ("index.html", "text/html; charset=utf-8", include_bytes!("../console-dist/index.html")),
    ("console.js", "text/javascript; charset=utf-8", include_bytes!("../console-dist/console.js")),
    ("console.css", "text/css; charset=utf-8", include_bytes!("../console-dist/console.css")),
];

/// Where the console may connect and load from: its own origin only.
const CSP: &str = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; \
                   style-src 'self'; script-src 'self'; frame-ancestors 'none'";

/// Most rows one `/v1/entries` page holds.
const MAX_PAGE: usize = 1000;

/// The console's routes, merged into the server's router.
pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(|| async { asset("index.html") }))
        .route("/console/{file}", get(|Path(file): Path<String>| async move { asset(&file) }))
        .route("/console/session", get(session))
        .route("/v1/schema", get(http_schema))
        .route("/v1/entries", get(http_entries))
        .route("/v1/figures", get(http_figures))
}

fn asset(name: &str) -> Response {
    let Some((_, content_type, bytes)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return error_reply(Encoding::Json, &RequestError::bad_request(format!("the console has no file {name:?}")));
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        *bytes,
    )
        .into_response()
}

async fn session(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let token_in_query = query.ok().and_then(|Query(q)| q.into_iter().find(|(k, _)| k == "token").map(|(_, v)| v));
    let open = shared.authenticate(&HeaderMap::new(), None).is_ok();
    let answer = match shared.authenticate(&headers, token_in_query.as_deref()) {
        Ok(role) => json!({ "tokens": !open, "role": role.to_string() }),
        Err(e) => json!({ "tokens": !open, "role": null, "message": e.message }),
    };
    json_reply(&answer)
}

fn json_reply(value: &Value) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], value.to_string())
        .into_response()
}

async fn http_schema(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    match query_map(query).and_then(|q| http_admit(&shared, &headers, &q)) {
        Ok(_) => json_reply(&describe_schema(shared.engine.schema())),
        Err(e) => error_reply(Encoding::Json, &e),
    }
}

async fn http_figures(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    match query_map(query).and_then(|q| http_admit(&shared, &headers, &q)) {
        Ok(_permit) => json_reply(&shared.figures.json(shared.engine.database(), &shared.gauges())),
        Err(e) => error_reply(Encoding::Json, &e),
    }
}

async fn http_entries(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let prepared = (|| {
        let q = query_map(query)?;
        let (_role, permit) = http_admit(&shared, &headers, &q)?;
        let number = |name: &str, default: usize| -> Result<usize, RequestError> {
            q.get(name).map_or(Ok(default), |v| {
                v.parse().map_err(|_| RequestError::bad_request(format!("{name} {v:?} is not a count")))
            })
        };
        let page = Page {
            path: q.get("path").cloned().unwrap_or_default(),
            collection: q
                .get("collection")
                .cloned()
                .ok_or_else(|| RequestError::bad_request("give the collection's name as `collection`"))?,
            prefix: q.get("prefix").cloned().unwrap_or_default(),
            offset: number("offset", 0)?,
            limit: number("limit", 50)?.min(MAX_PAGE),
        };
        Ok::<_, RequestError>((permit, page))
    })();
    let (permit, page) = match prepared {
        Ok(p) => p,
        Err(e) => return error_reply(Encoding::Json, &e),
    };
    let engine = shared.engine.clone();
    let result = tokio::task::spawn_blocking(move || entries(&engine, &page)).await;
    drop(permit);
    match result {
        Ok(Ok(v)) => json_reply(&v),
        Ok(Err(e)) => error_reply(Encoding::Json, &e),
        Err(e) => error_reply(Encoding::Json, &RequestError::new(ErrorCode::Internal, e.to_string())),
    }
}

struct Page {
    path: String,
    collection: String,
    prefix: String,
    offset: usize,
    limit: usize,
}

/// The scalar properties a collection's rows show: numbers, texts, references, stategroups.
fn scalar(kind: &PropertyKind) -> bool {
    matches!(
        kind,
        PropertyKind::Number | PropertyKind::Text | PropertyKind::Reference { .. } | PropertyKind::StateGroup { .. }
    )
}

fn entries(engine: &espalier_instruction::Engine, page: &Page) -> Result<Value, RequestError> {
    let data = |e: espalier_transaction::DataError| RequestError::new(ErrorCode::Storage, e.to_string());
    let get = exec::get_plan(engine, &page.path)?;
    let snap = engine.database().snapshot().map_err(data)?;
    let graph = snap.graph();
    let owner = exec::walk(&graph, &get, &Default::default())?;
    let schema = graph.schema;
    let collection = schema
        .find(owner.ty, &page.collection)
        .filter(|p| matches!(p.kind, PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. }))
        .ok_or_else(|| {
            RequestError::new(
                ErrorCode::Type,
                format!("{} has no dictionary or matrix '{}'", schema.describe_node_type(owner.ty), page.collection),
            )
        })?;
    let entry_type = graph.entry_type(collection.id);
    let columns: Vec<_> = schema
        .node_type(entry_type)
        .properties
        .iter()
        .map(|p| schema.property(*p))
        .filter(|p| scalar(&p.kind))
        .collect();
    let is_matrix = matches!(collection.kind, PropertyKind::Matrix { .. });
    let mut total = 0usize;
    let mut rows = Vec::new();
    for item in graph.entry_views(owner, collection.id).map_err(data)? {
        let (raw, view) = item.map_err(data)?;
        // A dictionary's key is its text; a matrix's is its target's key, read only if needed.
        let key = if is_matrix || !page.prefix.is_empty() && raw.starts_with(page.prefix.as_bytes()) {
            Some(graph.entry_key(view.node).map_err(data)?)
        } else {
            None
        };
        let matches = page.prefix.is_empty()
            || match &key {
                Some(k) => k.first().is_some_and(|first| first.starts_with(&page.prefix)),
                None => false,
            };
        if !matches {
            continue;
        }
        total += 1;
        if total <= page.offset || rows.len() >= page.limit {
            continue;
        }
        let key = match key {
            Some(k) => k,
            None => graph.entry_key(view.node).map_err(data)?,
        };
        let mut values = Vec::with_capacity(columns.len());
        for p in &columns {
            values.push(match &p.kind {
                PropertyKind::Number => json!(graph.number(view.node, p.id).map_err(data)?),
                PropertyKind::Text => json!(graph.text(view.node, p.id).map_err(data)?),
                PropertyKind::Reference { target } => {
                    let id = graph.reference(view.node, p.id).map_err(data)?;
                    let k = graph.target_key(id, target).map_err(data)?;
                    if k.len() == 1 {
                        json!(k[0])
                    } else {
                        json!(k)
                    }
                }
                PropertyKind::StateGroup { .. } => {
                    let (state, _) = graph.state(view.node, p.id).map_err(data)?;
                    json!(graph.state_name(p.id, state))
                }
                _ => Value::Null,
            });
        }
        rows.push(json!({ "key": key, "values": values }));
    }
    Ok(json!({
        "kind": "entries",
        "version": snap.version().map_err(data)?,
        "total": total,
        "columns": columns.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        "rows": rows,
    }))
}

/// The schema as `GET /v1/schema` answers it.
pub fn describe_schema(schema: &Schema) -> Value {
    let commands: Vec<Value> = schema
        .commands
        .iter()
        .map(|c| {
            let params: Vec<Value> = c
                .params
                .iter()
                .map(|(name, kind)| {
                    json!({ "name": name, "kind": match kind { ParamKind::Number => "number", ParamKind::Text => "text" } })
                })
                .collect();
            json!({ "name": c.name, "params": params, "body": c.body.trim() })
        })
        .collect();
    let indexes: Vec<Value> = schema
        .indexes
        .iter()
        .map(|i| {
            json!({
                "name": i.name,
                "collection": match schema.property(i.collection).kind {
                    PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => schema.node_type_name(node),
                    _ => String::new(),
                },
                "collection_name": schema.property(i.collection).name,
                "property": schema.property(i.property).name,
                "kind": match i.kind { IndexKind::Equality => "equality", IndexKind::Range => "range", IndexKind::Prefix => "prefix" },
                "unique": i.unique,
            })
        })
        .collect();
    json!({
        "text": schema.source,
        "root": describe_type(schema, espalier_schema::ROOT),
        "commands": commands,
        "indexes": indexes,
    })
}

fn describe_type(schema: &Schema, id: NodeTypeId) -> Value {
    let properties: Vec<Value> = schema
        .node_type(id)
        .properties
        .iter()
        .map(|p| {
            let p = schema.property(*p);
            let mut out = json!({ "name": p.name, "kind": p.kind.keyword() });
            match &p.kind {
                PropertyKind::Group { node } | PropertyKind::Dictionary { node } => {
                    out["node"] = describe_type(schema, *node);
                }
                PropertyKind::Matrix { node, target } => {
                    out["node"] = describe_type(schema, *node);
                    out["target"] = describe_target(schema, target);
                }
                PropertyKind::Reference { target } => out["target"] = describe_target(schema, target),
                PropertyKind::StateGroup { states } => {
                    out["states"] = states
                        .iter()
                        .map(|s| json!({ "name": s.name, "node": describe_type(schema, s.node) }))
                        .collect();
                }
                PropertyKind::Number | PropertyKind::Text => {}
            }
            if let Some(d) = &p.derived {
                out["derived"] = json!(describe_derivation(schema, d));
            }
            out
        })
        .collect();
    json!({ "id": id, "path": schema.node_type_name(id), "properties": properties })
}

fn describe_target(schema: &Schema, t: &espalier_schema::ReferenceTarget) -> Value {
    let text = schema.source.get(t.span.start as usize..t.span.end as usize).unwrap_or("");
    json!({
        "type": t.entry_type,
        "path": schema.node_type_name(t.entry_type),
        "text": text,
        "key_arity": t.key_arity,
    })
}

fn describe_derivation(schema: &Schema, d: &Derivation) -> String {
    let name = |p: PropertyId| format!("'{}'", schema.property(p).name);
    match d {
        Derivation::Aggregate { function, over, value } => {
            let f = match function {
                Aggregate::Count => "count",
                Aggregate::Sum => "sum",
                Aggregate::Min => "min",
                Aggregate::Max => "max",
            };
            let over = match over {
                Over::Collection(p) => match schema.property(*p).kind {
                    PropertyKind::Matrix { .. } => format!("% {}", name(*p)),
                    _ => format!(". {}", name(*p)),
                },
                Over::Referrers(p) => format!("< {}", name(*p)),
            };
            match value {
                Some(v) => format!("{f} ( {over} ) {}", name(*v)),
                None => format!("{f} ( {over} )"),
            }
        }
        Derivation::Condition { number, op, value } => {
            format!("condition ( {} {} {value} )", name(*number), op.symbol())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_schema_is_described_with_targets_states_derivations_commands_and_indexes() {
        let source = "root (
            'Clients' -> dictionary ( 'Name' -> text )
            'Orders' -> dictionary (
                'Client' -> reference ( .^ . 'Clients' )
                'Lines' -> dictionary ( 'Amount' -> number )
                'Line Count' -> count ( . 'Lines' )
                'Big' -> condition ( 'Line Count' >= 3 )
                'Status' -> stategroup ( 'Open' -> ( ) 'Done' -> ( 'At' -> number ) )
            )
        )
        command 'close' ( 'order' -> text ) ( update . 'Orders' : $order ( 'Status' -> stategroup 'Done' set to ( ) ) )
        index 'Client Name' ( . 'Clients' ) 'Name' prefix";
        let schema = espalier_schema::compile(source).expect("the schema compiles");
        let d = describe_schema(&schema);
        assert_eq!(d["text"], source);
        let orders = &d["root"]["properties"][1];
        assert_eq!(orders["name"], "Orders");
        assert_eq!(orders["kind"], "dictionary");
        let props = &orders["node"]["properties"];
        assert_eq!(props[0]["target"]["path"], "root.'Clients'");
        assert_eq!(props[0]["target"]["text"], "( .^ . 'Clients' )");
        assert_eq!(props[2]["derived"], "count ( . 'Lines' )");
        assert_eq!(props[3]["derived"], "condition ( 'Line Count' >= 3 )");
        assert_eq!(props[4]["states"][1]["name"], "Done");
        assert_eq!(props[4]["states"][1]["node"]["properties"][0]["name"], "At");
        assert_eq!(d["commands"][0]["name"], "close");
        assert_eq!(d["commands"][0]["params"][0], json!({ "name": "order", "kind": "text" }));
        assert_eq!(d["indexes"][0]["kind"], "prefix");
        assert_eq!(d["indexes"][0]["collection_name"], "Clients");
    }

    #[test]
    fn every_console_file_is_served_with_its_type_and_an_unknown_one_is_refused() {
        for (name, content_type, bytes) in FILES {
            assert!(!bytes.is_empty(), "{name} is empty");
            let r = asset(name);
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers()[header::CONTENT_TYPE], content_type);
        }
        assert_eq!(asset("../Cargo.toml").status(), StatusCode::BAD_REQUEST);
    }
}
