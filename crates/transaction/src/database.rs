//! `Database`: the tables, their compiled schema, the write queue and the change feed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use espalier_data::{meta, ChangeSet, DataError, Graph, QueryDiff, Touched, WriteGraph};
use espalier_schema::Schema;
use espalier_storage::tables::{Read, Tables, TablesError, TablesOptions};
use espalier_storage::{DirLock, Durability, Holder};

use crate::feed::{Feed, Subscription};
use crate::group_commit::{BatchRunner, Completions, DetachedJob, Job, Outcome, TypedJob, WriteQueue};
use crate::TxError;

/// How a database is created or opened: durability, batching, and the bounds that trigger checkpoints.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// When a commit is durable (fsync on every commit, periodically, or never).
    pub durability: Durability,
    /// Most requests sharing one commit.
    pub max_batch: usize,
    /// Size of a log segment file.
    pub log_segment_size: u64,
    /// A checkpoint is written (in the background) once this many bytes were logged since the
    /// last one: the log, and so the time recovery takes, stays about this large.
    pub checkpoint_log_bytes: u64,
    /// The in-memory bound: a checkpoint is written (in the background) once the storage
    /// layer's heap (table pages, key index nodes and texts written since the last checkpoint,
    /// `espalier_storage::heap_bytes`) grew by this much since the last one. The
    /// checkpoint maps what it wrote and the heap copies go, so the data can be larger than
    /// memory. Past twice this growth, writes wait for the running checkpoint. The writer's hash
    /// table of the strings (about 10 bytes a string) stays in memory. The heap is counted per process, for all its databases.
    pub memory_bytes: u64,
}

impl Default for DatabaseOptions {
    fn default() -> Self {
        DatabaseOptions {
            durability: Durability::Sync,
            max_batch: 256,
            log_segment_size: 64 << 20,
            checkpoint_log_bytes: 64 << 20,
            memory_bytes: 256 << 20,
        }
    }
}

/// A committed request's result.
#[derive(Debug)]
pub struct Committed<R> {
    /// What the request's closure returned.
    pub value: R,
    /// The version this request's changes carry (commit order).
    pub version: u64,
    /// The request's changes (the change set subscribers get too).
    pub changes: Arc<ChangeSet>,
}

/// How long after a failed checkpoint the next is tried.
pub const CHECKPOINT_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An open database: its tables and compiled schema, the write queue that group-commits
/// requests, and the change feed. Shared as an `Arc`.
pub struct Database {
    tables: Arc<Tables>,
    durability: Durability,
    checkpoint_log_bytes: u64,
    memory_bytes: u64,
    /// The storage heap's low-water mark since the last checkpoint ended: the in-memory part
    /// is what grew above it ([`DatabaseOptions::memory_bytes`]).
    heap_floor: AtomicU64,
    /// The background checkpoint, while one runs (joined before the next and on drop).
    checkpointer: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// After a failed checkpoint (a full disk, say), none is tried before this time: one
    /// line of log per [`CHECKPOINT_RETRY`], not one per commit.
    checkpoint_retry_at: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    schema: Arc<Schema>,
    queue: WriteQueue,
    feed: Feed,
    version: AtomicU64,
    /// Told of every commit before the next begins (registered incremental queries).
    hooks: std::sync::Mutex<Vec<Arc<dyn CommitHook>>>,
    /// Counted since open, for the server's figures ([`CommitFigures`]).
    commits: AtomicU64,
    committed_requests: AtomicU64,
    commit_nanos: AtomicU64,
    /// Time spent in the storage commit itself (writing, and with `sync` durability the fsync).
    store_commit_nanos: AtomicU64,
    /// Batches by requests committed: bucket `i` counts batches of at most `2^i` requests.
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
}

/// Buckets of [`CommitFigures::batch_sizes`]: at most 1, 2, 4, … 128 requests, then more.
pub const BATCH_BUCKETS: usize = 9;

/// Counters of the commits since the database was opened: `requests / commits` is the mean
/// batch size, `nanos / commits` the mean time a batch took (run, commit, and its fsync).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitFigures {
    /// Commits (batches that kept at least one request).
    pub commits: u64,
    /// Requests those commits held.
    pub requests: u64,
    /// Time the commits took, in nanoseconds (run, commit, and its fsync).
    pub nanos: u64,
    /// Of `nanos`, the time the storage commit took (writing, and its fsync if any).
    pub store_commit_nanos: u64,
    /// Commits by batch size: bucket `i < 8` counts commits of at most `2^i` requests (not
    /// cumulative), the last one commits of more than 128.
    pub batch_sizes: [u64; BATCH_BUCKETS],
}

/// Something that must see each commit's data exactly, before the next commit begins.
pub trait CommitHook: Send + Sync {
    /// `graph` reads the commit `version` (None if it could not be read); `touched` is what
    /// the commit's requests touched. The differences go on the commit's last change set.
    fn committed(&self, graph: Option<Graph<'_>>, version: u64, touched: &Touched) -> Vec<QueryDiff>;
}

impl Drop for Database {
    fn drop(&mut self) {
        // The writer thread holds only a weak reference; tell it to end.
        self.queue.stop();
        // A checkpoint in progress holds the tables (and so the directory lock): finish it.
        if let Some(running) = self.checkpointer.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = running.join();
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("path", &self.tables.dir()).finish()
    }
}

/// A consistent read-only view: sees every commit before it began, none after.
pub struct Snapshot<'d> {
    snapshot: Arc<espalier_storage::tables::Snapshot>,
    schema: &'d Schema,
}

impl<'d> Snapshot<'d> {
    /// The graph as this snapshot sees it.
    pub fn graph(&self) -> Graph<'_> {
        Graph::new(self.schema, &*self.snapshot)
    }

    /// The stored version this snapshot reads.
    pub fn reader(&self) -> &espalier_storage::tables::Snapshot {
        &self.snapshot
    }

    /// The version of the last commit this snapshot sees.
    pub fn version(&self) -> Result<u64, DataError> {
        Ok(self.snapshot.version())
    }
}

/// What to do with a database of another on-disk format, as the open's error says it.
const WAY_OVER: &str = "Export it with the build that made it and import the dump with this one (README, \
                        \"Moving a database from an earlier version\")";

/// A failure to open the tables: a held lock stays typed (callers tell the user who holds it).
fn open_error(e: TablesError) -> TxError {
    match e {
        TablesError::Locked(lock) => TxError::Locked(Arc::new(lock)),
        // The schema is the stored one, so only a build of another on-disk format lays its
        // rows out otherwise (format 6 shrank the row header, say).
        e @ TablesError::ShapeMismatch { .. } => TxError::Open(format!(
            "{e}: it was written by a build of another on-disk format (this one reads format {}). {WAY_OVER}",
            meta::FORMAT_VERSION
        )),
        e => TxError::Open(e.to_string()),
    }
}

fn tables_options(options: &DatabaseOptions) -> TablesOptions {
    TablesOptions { durability: options.durability, holder: Holder::Process, segment_size: options.log_segment_size }
}

/// The files in `dir` whose name ends in `.ext`, in name order (none if `dir` is missing).
fn with_extension(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == ext)).collect())
        .unwrap_or_default();
    found.sort();
    found
}

impl Database {
    /// Whether `path` holds a database.
    pub fn exists(path: &Path) -> bool {
        Tables::exists(path)
    }

    /// The files of the database in `path` that hold its data (the manifest, the checkpoint files,
    /// then the log's segments in order), for copying it or reading it cold; not the lock.
    pub fn files(path: &Path) -> Vec<std::path::PathBuf> {
        let mut files = vec![path.join(espalier_storage::tables::MANIFEST)];
        files.extend(with_extension(path, "ckpt"));
        files.extend(with_extension(&espalier_storage::log::log_dir(path), "log"));
        files
    }

    /// Creates a database at `path` (a directory) for `schema`, with a default root node.
    /// Fails if a database is already there.
    pub fn create(path: &Path, schema: Schema, options: DatabaseOptions) -> Result<Arc<Database>, TxError> {
        if Tables::exists(path) {
            return Err(TxError::Open(format!("{} already holds a database", path.display())));
        }
        let shape = espalier_data::shape(&schema);
        let tables =
            Tables::create(path, shape, schema.source.as_bytes(), tables_options(&options)).map_err(open_error)?;
        let db = Database::assemble(tables, Arc::new(schema), options, 0);
        db.write(move |g: &mut WriteGraph<'_, '_>| -> Result<(), TxError> {
            g.txn().set_meta(meta::FORMAT, &meta::FORMAT_VERSION.to_le_bytes()).map_err(DataError::from)?;
            g.init_root()?;
            Ok(())
        })
        .map_err(|e| TxError::Open(format!("initialising {}: {e}", path.display())))?;
        Ok(db)
    }

    /// Opens an existing database; its schema is the one stored in it. Recovers from the log.
    pub fn open(path: &Path, options: DatabaseOptions) -> Result<Arc<Database>, TxError> {
        let (_, catalog) = Tables::read_manifest(path).map_err(open_error)?;
        let source = String::from_utf8_lossy(&catalog).into_owned();
        let schema = espalier_schema::compile(&source).map_err(|d| {
            TxError::Open(format!("the stored schema does not compile:\n{}", d.render(&source, "schema")))
        })?;
        let tables = Tables::open(path, espalier_data::shape(&schema), tables_options(&options)).map_err(open_error)?;
        let snapshot = tables.snapshot();
        if snapshot.version() > 0 {
            let found = snapshot.meta(meta::FORMAT).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
            if found != Some(meta::FORMAT_VERSION) {
                let found = found.map_or_else(|| "no format version".to_string(), |f| format!("on-disk format {f}"));
                return Err(TxError::Open(format!(
                    "{} has {found}; this build reads format {}. {WAY_OVER}",
                    path.display(),
                    meta::FORMAT_VERSION
                )));
            }
        }
        let version = snapshot.version();
        drop(snapshot);
        Ok(Database::assemble(tables, Arc::new(schema), options, version))
    }

    fn assemble(tables: Tables, schema: Arc<Schema>, options: DatabaseOptions, version: u64) -> Arc<Database> {
        Arc::new(Database {
            tables: Arc::new(tables),
            durability: options.durability,
            checkpoint_log_bytes: options.checkpoint_log_bytes,
            memory_bytes: options.memory_bytes,
            heap_floor: AtomicU64::new(espalier_storage::heap_bytes() as u64),
            checkpointer: std::sync::Mutex::new(None),
            checkpoint_retry_at: Arc::default(),
            schema,
            queue: WriteQueue::new(options.max_batch),
            feed: Feed::default(),
            version: AtomicU64::new(version),
            hooks: std::sync::Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            committed_requests: AtomicU64::new(0),
            commit_nanos: AtomicU64::new(0),
            store_commit_nanos: AtomicU64::new(0),
            batch_sizes: Default::default(),
        })
    }

    /// The commits since open: how many, how many requests they held, and the time they took.
    pub fn commit_figures(&self) -> CommitFigures {
        CommitFigures {
            commits: self.commits.load(Ordering::Relaxed),
            requests: self.committed_requests.load(Ordering::Relaxed),
            nanos: self.commit_nanos.load(Ordering::Relaxed),
            store_commit_nanos: self.store_commit_nanos.load(Ordering::Relaxed),
            batch_sizes: std::array::from_fn(|i| self.batch_sizes[i].load(Ordering::Relaxed)),
        }
    }

    /// The database's compiled schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The tables (the storage layer's handle).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Writes a checkpoint now (waiting for one in progress first); `None` if nothing was
    /// committed since the last.
    pub fn checkpoint(&self) -> Result<Option<espalier_storage::tables::Checkpointed>, TxError> {
        self.tables.checkpoint().map_err(|e| TxError::Commit(format!("checkpoint: {e}")))
    }

    /// Starts a background checkpoint if the log or the storage heap grew past its bound since
    /// the last one, and none is running; waits for the running one if the heap grew past
    /// twice the bound. A checkpoint writes only the pages and leaves on the heap (those
    /// mapped from older files are named there), so a bulk load writes its data about once.
    fn maybe_checkpoint(&self) {
        let heap = espalier_storage::heap_bytes() as u64;
        let floor = self.heap_floor.fetch_min(heap, Ordering::Relaxed).min(heap);
        let over_memory = heap.saturating_sub(floor) >= self.memory_bytes;
        if self.tables.log_bytes_since_checkpoint() < self.checkpoint_log_bytes && !over_memory {
            return;
        }
        let retry_at = self.checkpoint_retry_at.clone();
        if lock(&retry_at).is_some_and(|at| std::time::Instant::now() < at) {
            return;
        }
        let mut running = self.checkpointer.lock().unwrap_or_else(|p| p.into_inner());
        // While a checkpoint runs the heap goes on growing with the writes. Past twice the
        // bound the writer waits for it (this batch's replies and the next batch wait), so the
        // in-memory part stays bounded however fast writes come.
        let throttle = heap.saturating_sub(floor) >= self.memory_bytes.saturating_mul(2);
        if running.as_ref().is_some_and(|h| !h.is_finished()) && !throttle {
            return;
        }
        if let Some(done) = running.take() {
            let _ = done.join();
            // What stays on the heap after a checkpoint (strings, inner nodes, what readers
            // still hold) is the new floor.
            self.heap_floor.store(heap, Ordering::Relaxed);
            if self.tables.log_bytes_since_checkpoint() < self.checkpoint_log_bytes {
                return;
            }
        }
        let tables = self.tables.clone();
        let spawned = std::thread::Builder::new().name("espalier-checkpoint".into()).spawn(move || {
            // A failure leaves the previous checkpoint and the whole log: nothing is lost, and
            // a commit past the bound tries again after a pause.
            match tables.checkpoint() {
                Ok(_) => *lock(&retry_at) = None,
                Err(e) => {
                    eprintln!("espalier: checkpoint failed (next try in {} s): {e}", CHECKPOINT_RETRY.as_secs());
                    *lock(&retry_at) = Some(std::time::Instant::now() + CHECKPOINT_RETRY);
                }
            }
        });
        *running = spawned.ok();
    }

    /// What recovery found when the database was opened (commits replayed, a torn last write
    /// cut).
    pub fn recovered(&self) -> &espalier_storage::tables::Recovered {
        self.tables.recovered()
    }

    /// When a commit is durable.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The database directory's lock (a server records its address in it).
    pub fn dir_lock(&self) -> &DirLock {
        self.tables.dir_lock()
    }

    /// Makes every commit so far durable (for `periodic` and `none` durability).
    pub fn sync(&self) -> Result<(), TxError> {
        self.tables.writer().sync().map_err(|e| TxError::Commit(e.to_string()))
    }

    /// Bytes the database's files ([`Database::files`]) take on disk (allocated blocks), with
    /// the log segment prepared ahead (`log/*.tmp`, pre-zeroed: not data, but disk it holds).
    pub fn disk_size(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        let prepared = with_extension(&espalier_storage::log::log_dir(self.tables.dir()), "tmp");
        // A file that went meanwhile (a checkpoint replaced, a segment cut) counts 0.
        Database::files(self.tables.dir())
            .iter()
            .chain(&prepared)
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.blocks() * 512)
            .sum()
    }

    /// Sets the version of an otherwise unchanged database (an import carrying over the
    /// version of the dump it was made from). Only before anything else writes.
    pub fn set_version(&self, version: u64) -> Result<(), TxError> {
        let mut w = self.tables.writer();
        w.commit_then(version, &mut || self.version.store(version, Ordering::Release))
            .map_err(|e| TxError::Commit(e.to_string()))?;
        Ok(())
    }

    /// The version of the last commit.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// A consistent read-only view of every commit so far.
    pub fn snapshot(&self) -> Result<Snapshot<'_>, DataError> {
        Ok(Snapshot { snapshot: self.tables.snapshot(), schema: &self.schema })
    }

    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn CommitHook>>> {
        // Only pushes happen under the lock: a panic cannot leave the list half-changed.
        self.hooks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a hook every later commit calls (see [`CommitHook`]).
    pub fn add_commit_hook(&self, hook: Arc<dyn CommitHook>) {
        self.hooks().push(hook);
    }

    /// Runs the commit hooks on a commit's change sets (one per request, `None` for a request
    /// rolled back), and frees what the requests touched (nothing else reads it).
    fn run_hooks(&self, results: &mut [Option<Arc<ChangeSet>>]) {
        let hooks: Vec<Arc<dyn CommitHook>> = self.hooks().clone();
        let touched = if hooks.is_empty() {
            Touched::default()
        } else {
            Touched::union(results.iter().flatten().map(|set| &set.touched))
        };
        for set in results.iter_mut().flatten() {
            Arc::get_mut(set).expect("a change set is not shared before it is published").touched = Touched::default();
        }
        let Some(last) = results.iter_mut().rev().flatten().next() else { return };
        if hooks.is_empty() {
            return;
        }
        let version = last.version;
        let snapshot = self.snapshot().ok();
        let mut diffs = Vec::new();
        for hook in hooks {
            diffs.extend(hook.committed(snapshot.as_ref().map(Snapshot::graph), version, &touched));
        }
        Arc::get_mut(last).expect("a change set is not shared before it is published").diffs = diffs;
    }

    /// Subscribes to every change set committed from now on (bounded queue of `capacity`).
    /// Waits for a running batch; not to be called from inside a write.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        // A batch decides when it begins whether to spell out its changes (whether anyone
        // subscribes): with the writer held none is running, and every later one sees this
        // subscriber. One that committed before but is not yet published is not sent.
        let _writer = self.tables.writer();
        self.feed.subscribe(capacity, self.version() + 1)
    }

    /// Runs `f` atomically as one request: its writes commit together (possibly sharing the
    /// commit with other threads' requests) or, if it returns an error, not at all.
    pub fn write<F, R, E>(&self, f: F) -> Result<Committed<R>, E>
    where
        F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
        R: Send,
        E: Send + From<TxError> + From<DataError>,
    {
        self.submit(f, true)
    }

    /// [`Database::write`] for a caller that reads only how many changes its request made
    /// (`changes.count`): the changes are spelt out (named, in `changes.changes`) only when
    /// a subscriber reads them. The engine's mutations run so; naming the node, property
    /// and values of each change was most of an embedded update commit's allocations.
    pub fn write_counting<F, R, E>(&self, f: F) -> Result<Committed<R>, E>
    where
        F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
        R: Send,
        E: Send + From<TxError> + From<DataError>,
    {
        self.submit(f, false)
    }

    /// Queues `f` and waits for its result; `spell`: its changes are named whether or not
    /// anyone subscribes.
    fn submit<F, R, E>(&self, f: F, spell: bool) -> Result<Committed<R>, E>
    where
        F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
        R: Send,
        E: Send + From<TxError> + From<DataError>,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let job: Box<dyn Job + '_> = Box::new(TypedJob { f, result: None, tx, spell });
        // SAFETY: the job only lives in the queue until it is completed, and `submit` does not
        // return before this job is completed (it waits for its `Done` signal), so every
        // borrow the closure holds outlives its use.
        let job: Box<dyn Job + 'static> = unsafe { std::mem::transmute(job) };
        self.queue.submit(self, job, rx)
    }

    /// Runs `f` as [`Database::write`] does, without waiting: `done` gets the result, on the
    /// thread that ran the batch. `lead_here`: if no batch is running, run this one on the
    /// calling thread (right when commits take microseconds, with no fsync) instead of handing
    /// it to the writer thread (right for an async runtime's thread when commits wait for
    /// the disk). Either way requests queued meanwhile, detached or not, share the batch.
    /// `done` is always called, also when the request cannot be queued.
    pub fn write_detached<F, R, E, D>(self: &Arc<Self>, f: F, lead_here: bool, done: D)
    where
        F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: Send + From<TxError> + From<DataError> + 'static,
        D: FnOnce(Result<Committed<R>, E>) + Send + 'static,
    {
        let job = Box::new(DetachedJob { f, result: None, done });
        let runner = || {
            let weak: Weak<dyn BatchRunner + Send + Sync> = Arc::downgrade(self) as Weak<Database>;
            weak
        };
        self.queue.submit_detached(&**self, runner, job, lead_here)
    }

    fn try_batch(&self, batch: &mut [Box<dyn Job>]) -> Result<Vec<Option<Arc<ChangeSet>>>, TxError> {
        let mut w = self.tables.writer();
        let result = self.run_requests(&mut w, batch).map_err(TxError::Commit);
        match result {
            Ok((version, results)) if results.iter().any(Option::is_some) => {
                let committing = std::time::Instant::now();
                // The counter moves before readers can see the commit: none sees a version ahead of it.
                w.commit_then(version, &mut || self.version.store(version, Ordering::Release)).map_err(|e| {
                    if e.is_storage_full() {
                        TxError::StorageFull(e.to_string())
                    } else {
                        TxError::Commit(e.to_string())
                    }
                })?;
                let nanos = u64::try_from(committing.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.store_commit_nanos.fetch_add(nanos, Ordering::Relaxed);
                Ok(results)
            }
            Ok((_, results)) => {
                w.abort(); // nothing to commit
                Ok(results)
            }
            Err(e) => {
                w.abort();
                Err(e)
            }
        }
    }

    /// Runs a batch's requests in the writer, each under its own savepoint; returns the
    /// version of the last kept request and the change sets.
    fn run_requests(
        &self,
        w: &mut espalier_storage::tables::Writer,
        batch: &mut [Box<dyn Job>],
    ) -> Result<(u64, Vec<Option<Arc<ChangeSet>>>), String> {
        let mut version = self.version();
        let mut results: Vec<Option<Arc<ChangeSet>>> = Vec::with_capacity(batch.len());
        let single = batch.len() == 1;
        let mut g = WriteGraph::new(&self.schema, w).map_err(|e| e.to_string())?;
        // Only commit hooks read what requests touched: without any, writes skip recording
        // it (a hook added meanwhile is told the batch touched everything).
        g.track_touched(!self.hooks().is_empty());
        let subscribed = self.feed.has_subscribers();
        for job in batch.iter_mut() {
            g.set_spell_changes(subscribed || job.spells_changes());
            // A lone request needs no savepoint: on failure the whole batch is aborted.
            let sp = if single { None } else { Some(g.savepoint()) };
            let keep = job.run(&mut g);
            if keep {
                version += 1;
                results.push(Some(Arc::new(g.take_changes(version))));
            } else {
                if let Some(sp) = sp {
                    g.rollback_to(sp).map_err(|e| e.to_string())?;
                }
                results.push(None);
            }
        }
        Ok((version, results))
    }
}

impl BatchRunner for Database {
    fn run_batch(&self, mut batch: Vec<Box<dyn Job>>) -> Completions {
        let started = std::time::Instant::now();
        let mut outcome = self.try_batch(&mut batch);
        if let Ok(results) = outcome.as_mut() {
            let committed = results.iter().flatten().count() as u64;
            if committed > 0 {
                self.maybe_checkpoint();
                self.commits.fetch_add(1, Ordering::Relaxed);
                self.committed_requests.fetch_add(committed, Ordering::Relaxed);
                let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.commit_nanos.fetch_add(nanos, Ordering::Relaxed);
                let bucket = (64 - (committed - 1).leading_zeros()) as usize;
                self.batch_sizes[bucket.min(BATCH_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
            }
            self.run_hooks(results);
        }
        match outcome {
            Ok(results) => batch
                .into_iter()
                .zip(results)
                .map(|(job, changes)| match changes {
                    Some(changes) => {
                        self.feed.publish(&changes);
                        let version = changes.version;
                        (job, Outcome::Committed { version, changes })
                    }
                    None => (job, Outcome::Rejected),
                })
                .collect(),
            Err(e) => batch.into_iter().map(|job| (job, Outcome::Failed(e.clone()))).collect(),
        }
    }
}
