//! A blocking wrapper for code without an async runtime (scripts, the command line). It runs
//! its own single-threaded runtime; subscriptions need the async [`crate::Client`].

use espalier_protocol::{Message, Params, QueryResult, Reply};

use crate::{ClientError, ClientOptions, Welcome};

/// A session with a server that blocks the calling thread (see [`crate::Client`]).
pub struct Client {
    runtime: tokio::runtime::Runtime,
    client: crate::Client,
}

impl Client {
    /// Opens a session (see [`crate::Client::connect`]).
    pub fn connect(url: &str, opts: ClientOptions) -> Result<Client, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Connect(format!("cannot start a runtime: {e}")))?;
        let client = runtime.block_on(crate::Client::connect(url, opts))?;
        Ok(Client { runtime, client })
    }

    /// What the server said when the session opened.
    pub fn welcome(&self) -> &Welcome {
        self.client.welcome()
    }

    /// Sends a `ping` and waits for the `pong`.
    pub fn ping(&self) -> Result<(), ClientError> {
        self.runtime.block_on(self.client.ping())
    }

    /// Runs an instruction given as text.
    pub fn execute(&self, text: &str, params: Option<Params>) -> Result<Reply, ClientError> {
        self.runtime.block_on(self.client.execute(text, params))
    }

    /// Runs a collection query (text) and returns its rows.
    pub fn query(&self, text: &str, params: Option<Params>) -> Result<QueryResult, ClientError> {
        self.runtime.block_on(self.client.query(text, params))
    }

    /// Reads one node (text node path, `""` for the root): (version, node in dump form).
    pub fn get(&self, path: &str, params: Option<Params>) -> Result<(u64, serde_json::Value), ClientError> {
        self.runtime.block_on(self.client.get(path, params))
    }

    /// The server's `status`.
    pub fn status(&self) -> Result<Message, ClientError> {
        self.runtime.block_on(self.client.status())
    }

    /// Asks the server to shut down (admin role).
    pub fn shutdown(&self) -> Result<(), ClientError> {
        self.runtime.block_on(self.client.shutdown())
    }

    /// Closes the session.
    pub fn close(&self) -> Result<(), ClientError> {
        self.runtime.block_on(self.client.close())
    }
}
