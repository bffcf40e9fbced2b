//! Integration tests: a real server on a free loopback port, driven by the Rust client (and
//! raw WebSocket / HTTP for what a client would never send).

mod admission;
mod auth;
mod common;
mod console;
mod errors;
mod frames;
mod history;
mod http;
mod limits;
mod operations;
mod requests;
mod shutdown;
mod subscriptions;
