//! Subscriptions: node and query, commit order and versions, unsubscribe, reconnect and
//! resume, reload when the history is too short, and a slow subscriber that gets `reload`
//! while writers keep going.

use std::time::{Duration, Instant};

use espalier_client::{ClientOptions, Event, Subscription};
use espalier_protocol::{Change, ErrorCode, Message, Reply};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::*;

async fn next(sub: &mut Subscription) -> Event {
    tokio::time::timeout(Duration::from_secs(10), sub.next()).await.expect("an event in time").expect("not ended")
}

/// No event within `wait`.
async fn quiet(sub: &mut Subscription, wait: Duration) {
    if let Ok(e) = tokio::time::timeout(wait, sub.next()).await {
        panic!("expected no event, got {e:?}");
    }
}

fn version_of(reply: &Reply) -> u64 {
    match reply {
        Reply::Done { version, .. } => *version,
        other => panic!("not done: {other:?}"),
    }
}

#[tokio::test]
async fn node_subscription_gets_each_commit_in_order_with_its_version() {
    let server = start().await;
    let watcher = server.client().await;
    let writer = server.client().await;
    let mut sub = watcher.subscribe_node(". 'Machines' : \"M1\"", None, None).await.unwrap();
    assert!(!sub.resumed);
    let pulses = sub.node.as_ref().unwrap()["Pulses"].as_i64().unwrap();
    assert_eq!(pulses, 2, "the demo data pulses M1 twice");

    let mut versions = Vec::new();
    for _ in 0..3 {
        versions.push(version_of(&writer.execute("command 'pulse' ( 'machine' -> \"M1\" )", None).await.unwrap()));
        // A commit elsewhere is not this subscription's business.
        writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();
    }
    for (i, v) in versions.iter().enumerate() {
        match next(&mut sub).await {
            Event::Changes { version, changes } => {
                assert_eq!(version, *v, "notification {i} carries its commit's version");
                assert_eq!(changes.len(), 1);
                let Change::Number { property, old, new, .. } = &changes[0] else { panic!("{changes:?}") };
                assert_eq!((property.as_str(), *old, *new), ("Pulses", pulses + i as i64, pulses + i as i64 + 1));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(sub.last_version(), versions[2]);
    quiet(&mut sub, Duration::from_millis(200)).await;

    // A state switch deep inside the subtree, and the node's own removal.
    writer.execute("command 'stop task' ( 'machine' -> \"M1\" )", None).await.unwrap();
    match next(&mut sub).await {
        Event::Changes { changes, .. } => {
            assert!(matches!(&changes[0], Change::StateSwitched { new, .. } if new == "Not Selected"), "{changes:?}")
        }
        other => panic!("{other:?}"),
    }
    writer.execute("update ( 'Machines' -> dictionary \"M1\" remove )", None).await.unwrap();
    match next(&mut sub).await {
        Event::Changes { changes, .. } => {
            assert!(matches!(&changes[0], Change::EntryRemoved { key, .. } if key == &vec!["M1".to_string()]))
        }
        other => panic!("{other:?}"),
    }
    sub.unsubscribe().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn subscribe_errors_and_unsubscribe() {
    let server = start_with(|c| limits(c, |l| l.max_subscriptions = 2)).await;
    let client = server.client().await;
    assert_eq!(code(client.subscribe_node(". 'Machines' : \"M9\"", None, None).await), ErrorCode::KeyMissing);
    assert_eq!(code(client.subscribe_node(". 'Machines' (", None, None).await), ErrorCode::Syntax);
    assert_eq!(
        code(client.subscribe_query("update . 'Machines' : \"M1\" ( 'Pulses' -> number 1 )", None, None).await),
        ErrorCode::BadRequest,
        "only queries can be subscribed to"
    );
    let a = client.subscribe_node(". 'Machines' : \"M1\"", None, None).await.unwrap();
    let mut b = client.subscribe_node(". 'Machines' : \"M2\"", None, None).await.unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(code(client.subscribe_node(". 'Machines' : \"M3\"", None, None).await), ErrorCode::TooManySubscriptions);
    // Unsubscribing frees a place; an unknown number is refused.
    let a_id = a.id;
    a.unsubscribe().await.unwrap();
    let m = client.request(Message::unsubscribe(0, a_id)).await;
    assert_eq!(code(m), ErrorCode::UnknownSubscription);
    let _c = client.subscribe_node(". 'Machines' : \"M3\"", None, None).await.unwrap();
    // After `unsubscribed`, nothing more arrives for it.
    let b_id = b.id;
    client.request(Message::unsubscribe(0, b_id)).await.unwrap();
    client.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), b.next()).await.expect("the stream ends");
    assert_eq!(end, None);
    let status = client.status().await.unwrap();
    assert_eq!(status.subscriptions, Some(1));
    server.stop().await;
}

#[tokio::test]
async fn query_subscription_sends_new_rows_when_they_change() {
    let server = start().await;
    let watcher = server.client().await;
    let writer = server.client().await;
    let mut sub = watcher
        .subscribe_query("collection select . 'Machines' 'Pulses' -> number : 'Pulses' > 0", None, None)
        .await
        .unwrap();
    let rows = sub.query.clone().unwrap();
    assert_eq!(rows.total, 1, "only M1 has pulses");
    // Outside the collection: no re-run, no notification.
    writer.execute("update . 'Clients' : \"c2\" ( 'City' -> text \"Leiden\" )", None).await.unwrap();
    // Inside, but the rows do not change (M3's costs are not selected): no notification.
    writer.execute("update . 'Machines' : \"M3\" ( 'Costs per Hour' -> number 1 )", None).await.unwrap();
    quiet(&mut sub, Duration::from_millis(300)).await;
    let v = version_of(&writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap());
    match next(&mut sub).await {
        Event::Rows { version, query } => {
            assert!(version >= v);
            assert_eq!(query.total, 2);
            assert_eq!(query.rows[1].key, vec!["M2"]);
            assert_eq!(query.rows[1].values, vec![json!(1)]);
        }
        other => panic!("{other:?}"),
    }
    // A new entry is a new row.
    writer.execute("update ( 'Machines' -> dictionary \"M4\" ( 'Pulses' -> number 5 ) )", None).await.unwrap();
    match next(&mut sub).await {
        Event::Rows { query, .. } => assert_eq!(query.total, 3),
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn query_subscription_that_follows_references_sees_their_targets_change() {
    let server = start().await;
    let c = server.client().await;
    let mut sub = c
        .subscribe_query(
            "collection select . 'Orders' 'premium' -> > 'Client' stategroup : 'Is Premium Client'",
            None,
            None,
        )
        .await
        .unwrap();
    let before = sub.query.clone().unwrap();
    c.execute("update . 'Clients' : \"c2\" ( 'Is Premium Client' -> stategroup 'Yes' set to ( ) )", None)
        .await
        .unwrap();
    match next(&mut sub).await {
        Event::Rows { query, .. } => {
            assert_ne!(query, before);
            assert_eq!(query.rows[1].values, vec![json!("Yes")]);
        }
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

/// Several writers at once: the subscriber sees every commit, in increasing version order.
#[tokio::test]
async fn commit_order_under_concurrent_writers() {
    let server = start().await;
    let watcher = server.client().await;
    let mut sub = watcher.subscribe_node(". 'Machines'  : \"M3\"", None, None).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = server.client().await;
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for _ in 0..25 {
                let r = c.execute("command 'pulse' ( 'machine' -> \"M3\" )", None).await.unwrap();
                versions.push(version_of(&r));
            }
            versions
        }));
    }
    let mut committed = Vec::new();
    for t in tasks {
        committed.extend(t.await.unwrap());
    }
    committed.sort();
    let mut seen = Vec::new();
    let mut last_pulses = 0;
    while seen.len() < committed.len() {
        match next(&mut sub).await {
            Event::Changes { version, changes } => {
                let Change::Number { old, new, .. } = &changes[0] else { panic!("{changes:?}") };
                assert_eq!(*old, last_pulses, "each notification continues where the last ended");
                last_pulses = *new;
                seen.push(version);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, committed, "every commit, once, in commit order");
    assert_eq!(last_pulses, 100);
    server.stop().await;
}

#[tokio::test]
async fn reconnect_resumes_after_the_last_version() {
    let server = start().await;
    let writer = server.client().await;
    let first = server.client().await;
    let mut sub = first.subscribe_node(". 'Machines' : \"M2\"", None, None).await.unwrap();
    writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();
    next(&mut sub).await;
    let last = sub.last_version();
    first.close().await.unwrap();
    drop(sub);
    drop(first);

    // While away: three commits to M2 and some elsewhere.
    let mut missed = Vec::new();
    for _ in 0..3 {
        missed.push(version_of(&writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap()));
        writer.execute("command 'pulse' ( 'machine' -> \"M3\" )", None).await.unwrap();
    }
    let again = server.client().await;
    let mut sub = again.subscribe_node(". 'Machines' : \"M2\"", None, Some(last)).await.unwrap();
    assert!(sub.resumed, "the history reaches back to {last}");
    assert_eq!(sub.version, last);
    assert!(sub.node.is_none(), "a resumed subscription carries no data");
    for v in &missed {
        match next(&mut sub).await {
            Event::Changes { version, .. } => assert_eq!(version, *v),
            other => panic!("{other:?}"),
        }
    }
    // And then the live ones.
    let live = version_of(&writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap());
    match next(&mut sub).await {
        Event::Changes { version, .. } => assert_eq!(version, live),
        other => panic!("{other:?}"),
    }
    // Resuming from the current version: nothing to replay.
    let now = again.status().await.unwrap().version.unwrap();
    let mut quiet_sub = again.subscribe_node(". 'Machines' : \"M2\"", None, Some(now)).await.unwrap();
    assert!(quiet_sub.resumed);
    quiet(&mut quiet_sub, Duration::from_millis(200)).await;
    // A `since` in the future is not resumable: the data comes afresh.
    let future = again.subscribe_node(". 'Machines' : \"M2\"", None, Some(now + 1000)).await.unwrap();
    assert!(!future.resumed && future.node.is_some());
    server.stop().await;
}

#[tokio::test]
async fn resume_past_the_history_reloads() {
    let server = start_with(|c| limits(c, |l| l.history_commits = 5)).await;
    let writer = server.client().await;
    let since = writer.status().await.unwrap().version.unwrap();
    for _ in 0..10 {
        writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();
    }
    let now = writer.status().await.unwrap().version.unwrap();
    // The hub takes in commits on its own thread; wait until it has seen them all.
    let mut history_from = None;
    for _ in 0..500 {
        history_from = writer.status().await.unwrap().history_from;
        if history_from == Some(now - 5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(history_from, Some(now - 5), "the history holds the last 5 commits");
    let c = server.client().await;
    let sub = c.subscribe_node(". 'Machines' : \"M2\"", None, Some(since)).await.unwrap();
    assert!(!sub.resumed, "the history no longer reaches back to {since}");
    assert_eq!(sub.version, now);
    assert_eq!(sub.node.as_ref().unwrap()["Pulses"], json!(10), "the data afresh");
    // Within the history it resumes, also for queries.
    let mut q = c
        .subscribe_query("collection select . 'Machines' 'Pulses' -> number : 'Pulses'", None, Some(now - 2))
        .await
        .unwrap();
    assert!(q.resumed);
    match next(&mut q).await {
        Event::Rows { version, query } => {
            assert!(version >= now);
            assert_eq!(query.rows[1].values, vec![json!(10)]);
        }
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

/// A subscriber that stops reading: its queue fills, it gets `reload` (never silent loss), and
/// writers are not slowed down meanwhile.
#[tokio::test]
async fn slow_subscriber_gets_reload_and_writers_keep_going() {
    let server = start_with(|c| limits(c, |l| l.subscriber_queue = 4)).await;
    // A raw session that we can stop reading.
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}/ws?encoding=json", server.url())).await.unwrap();
    let welcome = ws.next().await.unwrap().unwrap();
    assert!(welcome.to_text().unwrap().contains("\"welcome\""));
    let sub = Message::subscribe_node(1, ". 'Clients' : \"c3\"", None, None);
    ws.send(WsMessage::Text(serde_json::to_string(&sub).unwrap().into())).await.unwrap();
    let subscribed: Message = serde_json::from_str(ws.next().await.unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(subscribed.kind, espalier_protocol::Kind::Subscribed);

    // Now it does not read. Each commit's notification carries 256 KiB, so the socket buffers
    // fill after a few dozen and the server must queue, then give up on this subscriber.
    let writer = server.client().await;
    let big = "x".repeat(256 << 10);
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut last = 0;
    for i in 0..120 {
        let t = Instant::now();
        let text = format!("update . 'Clients' : \"c3\" ( 'City' -> text \"{i}{big}\" )");
        last = version_of(&writer.execute(&text, None).await.unwrap());
        slowest = slowest.max(t.elapsed());
    }
    let total = started.elapsed();
    assert!(slowest < Duration::from_secs(2), "a write waited {slowest:?} for the stalled subscriber");
    assert!(total < Duration::from_secs(60), "120 writes took {total:?}");

    // Read everything: notifications in order, then a reload at (or after) the last write.
    let mut versions = Vec::new();
    let mut reload = None;
    while reload.is_none() {
        let frame = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("in time").unwrap().unwrap();
        if !frame.is_text() {
            continue; // the server's idle ping, when this run took over half the idle timeout
        }
        let m: Message = serde_json::from_str(frame.to_text().unwrap()).unwrap();
        match m.kind {
            espalier_protocol::Kind::Notify => versions.push(m.version.unwrap()),
            espalier_protocol::Kind::Reload => reload = Some(m),
            other => panic!("unexpected {other}"),
        }
    }
    let reload = reload.unwrap();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "notifications in commit order");
    assert!(versions.len() < 120, "the subscriber could not have kept up with all of them");
    assert_eq!(reload.reason.as_deref(), Some("lagged"));
    assert!(reload.version.unwrap() >= *versions.last().unwrap_or(&0));
    let city = reload.node.as_ref().unwrap()["City"].as_str().unwrap().to_string();
    // The reload's data is at its version; any commit after it would follow as a notification.
    if reload.version.unwrap() == last {
        assert!(city.starts_with("119"), "the reload carries the newest data");
    }
    // The session is alive: a live notification follows.
    let after =
        version_of(&writer.execute("update . 'Clients' : \"c3\" ( 'City' -> text \"Delft\" )", None).await.unwrap());
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("in time").unwrap().unwrap();
        let m: Message = serde_json::from_str(frame.to_text().unwrap()).unwrap();
        if m.kind == espalier_protocol::Kind::Notify && m.version == Some(after) {
            break;
        }
        assert!(m.version.unwrap() <= after, "nothing beyond the last commit");
    }
    server.stop().await;
}

/// The client's own buffer overflowing ends the subscription with `Overflow`, from which it
/// can resume.
#[tokio::test]
async fn client_side_overflow_says_so_and_resume_recovers() {
    let server = start().await;
    let opts = ClientOptions { subscription_buffer: 2, ..Default::default() };
    let watcher = server.client_with(opts).await;
    let writer = server.client().await;
    let mut sub = watcher.subscribe_node(". 'Machines' : \"M2\"", None, None).await.unwrap();
    let mut last = 0;
    let mut overflowed = None;
    // Ten commits unread overflow a buffer of two, unless their notifications came so slowly
    // that this loop read them as they came: then it writes ten more, unread again.
    for _round in 0..20 {
        for _ in 0..10 {
            last = version_of(&writer.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap());
        }
        loop {
            match tokio::time::timeout(Duration::from_secs(10), sub.next()).await.expect("in time") {
                Some(Event::Changes { version, .. }) if version == last => break,
                Some(Event::Changes { .. }) => {}
                Some(Event::Overflow { last_version }) => {
                    overflowed = Some(last_version);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        if overflowed.is_some() {
            break;
        }
    }
    let Some(mut last_version) = overflowed else { panic!("twenty rounds of ten unread commits never overflowed") };
    assert!(tokio::time::timeout(Duration::from_secs(10), sub.next()).await.unwrap().is_none(), "Overflow ends it");
    // Resuming from the last version taken gets the rest (a tiny buffer may overflow again:
    // each round still gets further).
    for _ in 0..20 {
        if last_version == last {
            break;
        }
        let again = watcher.subscribe_node(". 'Machines' : \"M2\"", None, Some(last_version)).await.unwrap();
        assert!(again.resumed);
        let mut again = again;
        while let Some(e) = tokio::time::timeout(Duration::from_secs(10), again.next()).await.unwrap() {
            match e {
                Event::Changes { version, .. } => {
                    assert!(version > last_version, "no commit twice");
                    last_version = version;
                    if version == last {
                        break;
                    }
                }
                Event::Overflow { last_version: v } => assert_eq!(v, last_version),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(last_version, last, "resuming caught up");
    server.stop().await;
}

/// A commit whose changes do not fit in one message reloads the (smaller) data instead.
#[tokio::test]
async fn a_commit_too_large_to_notify_reloads() {
    let server = start_with(|c| limits(c, |l| l.max_result_bytes = 4096)).await;
    let c = server.client().await;
    let mut sub = c.subscribe_node(". 'Clients' : \"c2\"", None, None).await.unwrap();
    let updates: Vec<String> =
        (0..10).map(|i| format!("update . 'Clients' : \"c2\" ( 'City' -> text \"{}{i}\" )", "c".repeat(300))).collect();
    let v = version_of(&match c.execute(&format!("transaction ( {} )", updates.join(", ")), None).await.unwrap() {
        Reply::Transaction(list) => list[0].clone(),
        other => panic!("{other:?}"),
    });
    match next(&mut sub).await {
        Event::Reload { version, reason, node, .. } => {
            assert_eq!(reason, "too_large");
            assert!(version >= v);
            assert!(node.unwrap()["City"].as_str().unwrap().ends_with('9'));
        }
        other => panic!("{other:?}"),
    }
    // Small commits notify again.
    let w = version_of(&c.execute("update . 'Clients' : \"c2\" ( 'City' -> text \"Delft\" )", None).await.unwrap());
    match next(&mut sub).await {
        Event::Changes { version, .. } => assert_eq!(version, w),
        other => panic!("{other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn subscription_past_the_result_limit_ends_with_an_error() {
    let server = start_with(|c| limits(c, |l| l.max_result_bytes = 4096)).await;
    let c = server.client().await;
    let mut sub = c.subscribe_query("collection select . 'Clients' 'Name' -> text : 'Name'", None, None).await.unwrap();
    let long = "n".repeat(5000);
    c.execute(&format!("update . 'Clients' : \"c1\" ( 'Name' -> text \"{long}\" )"), None).await.unwrap();
    match next(&mut sub).await {
        Event::Ended { code, message } => {
            assert_eq!(code, ErrorCode::ResultTooLarge);
            assert!(message.contains("4096"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), sub.next()).await.unwrap(), None);
    c.ping().await.unwrap();
    server.stop().await;
}
