//! The host's task store: SQLite in `DIR/tasks.sqlite3` (WAL mode), shared
//! by every instance in this process and by every host process that opens
//! the same directory.
//!
//! Compare-and-swap runs inside an `IMMEDIATE` transaction, which takes the
//! database's write lock first: create is `INSERT ... ON CONFLICT (key) DO
//! NOTHING`, replace is `UPDATE ... WHERE key = ? AND version = ?`, delete
//! likewise, each checked by its change count; a refusal then reads and
//! reports the version found. Writers in other processes wait up to the
//! busy timeout.
//! The due query walks a partial index on `(due_at, key)`, so it costs what
//! it returns.
//!
//! **Group commit.** Writes (put, delete) go to one writer thread per store,
//! which takes every write pending when it starts a transaction, applies
//! each in order, and commits them together: concurrent writers share one
//! fsync. Each write is one conditional statement (a refused one changes
//! nothing, so it leaves the others as they are); only a refusal reads the
//! version it met. A write returns only after the commit that holds it is
//! durable, the same guarantee as a commit per write.
//!
//! **Checkpoints.** Copying the write-ahead log back into the database runs
//! on a thread of its own (see `SqliteStore::checkpoint_elsewhere`), so a
//! commit does not wait behind one unless the log has reached its cap; with
//! a million stored tasks and random keys a checkpoint wrote back a page
//! per create, and running it on the writer put it in the tail latency of
//! every write queued behind it. Past a cap the writer checkpoints itself
//! and waits (for a bounded time) for readers to let the log go, so a read
//! mark held a moment too long, here or in another process, cannot let the
//! log grow by every commit made meanwhile.
//!
//! **A held read mark.** Every read is its own transaction, and SQLite takes
//! and drops a shared lock on the log's read mark for each (two `fcntl`
//! calls, under a mutex the serving threads contend for). While reads go
//! on and the log is short, a thread of the store's keeps one read
//! transaction open on the log's newest mark (see `ReadMark`), so this
//! process always holds that lock and a read's own lock calls never reach
//! the kernel. A held mark keeps checkpoints from copying past it and the
//! log from starting over, so the thread lets it go as soon as the log
//! (read from SQLite's shared-memory index, whoever wrote it) reaches
//! `CHECKPOINT_AT` frames, and whenever reads stop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks_edge::store::{Entry, Store, StoreError, Version};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::affine::AffinePool;

/// The database file inside the data directory.
pub const FILE_NAME: &str = "tasks.sqlite3";

/// How long a writer waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle read connections kept for reuse, per serving thread.
const MAX_IDLE: usize = 16;

/// The page size of a new store. A stored task (about 1.3 KB for the
/// demo's reports) then fits in its B-tree leaf instead of spilling into an
/// overflow page, as it does with SQLite's default of 4 KiB in a table
/// without rowids (whose rows spill past about 1 KB): a read touches one
/// page less and a write rewrites one page instead of two. `tasks/get` at
/// 16 connections: 30,965 against 24,744/s (median of 8 runs), host CPU
/// 32.2 against 40.9 us per request; the flow +4% (bench/README.md).
pub const PAGE_SIZE: i64 = 16 * 1024;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    key     TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    body    TEXT NOT NULL,
    due_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_due ON entries (due_at, key) WHERE due_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS floor (
    one     INTEGER PRIMARY KEY CHECK (one = 0),
    version INTEGER NOT NULL
);
";

/// The SQLite store. Thread-safe: a read borrows a connection from a small
/// pool (or opens one); a write goes to the store's writer thread.
pub struct SqliteStore {
    path: PathBuf,
    /// Idle read connections, each kept with the thread that used it last.
    idle: AffinePool<Connection>,
    sync: Sync,
    writer: Mutex<Option<mpsc::Sender<Write>>>,
    /// Checkpoints the checkpoint thread has run.
    checkpoints: Arc<AtomicU64>,
    /// Waits at the cap that a reader outlasted.
    outlasted: Arc<AtomicU64>,
    /// The held read mark.
    mark: ReadMark,
}

/// Frames in the write-ahead log past which a commit wakes the
/// checkpointer (SQLite's own automatic checkpoint runs at 1,000).
const CHECKPOINT_AT: i32 = 1000;

/// Frames the log grows by before the thread is woken again: under
/// steady writes the log rarely starts over (that needs a checkpoint to
/// finish between two commits), and a checkpoint per commit would cost an
/// fsync of the database each.
const CHECKPOINT_STEP: i32 = CHECKPOINT_AT / 4;

/// Frames past which the writer checkpoints itself: it copies what the
/// thread has not copied yet, and the log starts over at the next commit.
const CHECKPOINT_CAP: i32 = 4 * CHECKPOINT_AT;

/// How long the writer waits at [`CHECKPOINT_CAP`] for readers to let the
/// log go (a read mark of this store's or of another process's that was
/// late to step aside). A reader that holds it longer costs the writer this
/// wait once per [`CHECKPOINT_CAP`] frames the log grows by meanwhile.
const CAP_WAIT: Duration = Duration::from_secs(1);

/// How often the read-mark thread looks again while reads go on: it
/// follows the log's newest mark (commits since it took its own make
/// readers take a mark of their own until then) and sees the log grow.
const MARK_REFRESH: Duration = Duration::from_millis(5);

/// The [`ReadMark`] thread's states.
const RELEASED: u8 = 0;
const HELD: u8 = 1;
/// No mark held, the thread looking again every [`MARK_REFRESH`] (the log
/// was too long, or a mark could not be taken).
const WAITING: u8 = 2;

/// A handle on the store's read-mark thread (see the module
/// documentation). The thread ends once every handle is gone.
#[derive(Default)]
struct ReadMark {
    state: Arc<MarkState>,
    wake: Option<mpsc::SyncSender<()>>,
}

#[derive(Default)]
struct MarkState {
    /// [`RELEASED`], [`HELD`] or [`WAITING`].
    status: std::sync::atomic::AtomicU8,
    /// A read began since the thread last looked.
    used: AtomicBool,
}

impl ReadMark {
    fn start(store: &SqliteStore) -> anyhow::Result<Self> {
        let state = Arc::new(MarkState::default());
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let (conns, theirs) = ([store.connect()?, store.connect()?], state.clone());
        for c in &conns {
            // A mark that cannot be taken at once is not worth waiting for.
            c.busy_timeout(Duration::ZERO)?;
        }
        std::thread::Builder::new()
            .name("sqlite-read-mark".into())
            .spawn(move || mark_loop(conns, &theirs, &woken))?;
        Ok(ReadMark {
            state,
            wake: Some(wake),
        })
    }

    /// Before a read: noted, and the thread woken if it holds no mark and
    /// is not looking on its own.
    fn touch(&self) {
        let Some(wake) = &self.wake else { return };
        if !self.state.used.load(Ordering::Relaxed) {
            self.state.used.store(true, Ordering::Relaxed);
        }
        if self.state.status.load(Ordering::Relaxed) == RELEASED {
            let _ = wake.try_send(());
        }
    }

    /// Whether the thread holds a mark now (for tests).
    #[cfg(test)]
    fn held(&self) -> bool {
        self.state.status.load(Ordering::Relaxed) == HELD
    }
}

/// The read-mark thread: `conns[held]` has a read transaction open while the
/// status is [`HELD`]; a new mark is taken on the other connection before
/// the old one is let go, so this process never stops holding one between.
fn mark_loop(conns: [Connection; 2], state: &MarkState, woken: &mpsc::Receiver<()>) {
    use mpsc::RecvTimeoutError::{Disconnected, Timeout};
    let mut held: Option<usize> = None;
    let release = |held: &mut Option<usize>| {
        if let Some(i) = held.take() {
            end_read(&conns[i]);
        }
    };
    loop {
        let signal = match state.status.load(Ordering::Relaxed) {
            RELEASED => woken.recv().map_err(|_| Disconnected),
            _ => woken.recv_timeout(MARK_REFRESH),
        };
        match signal {
            Err(Disconnected) => break,
            Err(Timeout) if !state.used.swap(false, Ordering::Relaxed) => {
                // No read since the last look: nothing to hold a mark for.
                release(&mut held);
                state.status.store(RELEASED, Ordering::Relaxed);
                continue;
            }
            _ => {}
        }
        let next = held.map_or(0, |i| 1 - i);
        if log_frames(&conns[next]).is_none_or(|frames| frames >= CHECKPOINT_AT.unsigned_abs()) {
            // Let checkpoints finish and the log start over.
            release(&mut held);
            state.status.store(WAITING, Ordering::Relaxed);
            continue;
        }
        if begin_read(&conns[next]).is_ok() {
            release(&mut held);
            held = Some(next);
            state.status.store(HELD, Ordering::Relaxed);
        } else {
            end_read(&conns[next]);
            release(&mut held);
            state.status.store(WAITING, Ordering::Relaxed);
        }
    }
    release(&mut held);
}

/// Opens a read transaction that holds the log's newest read mark. Its
/// statements are prepared once per connection: the mark is taken again
/// every few milliseconds while reads go on.
fn begin_read(c: &Connection) -> rusqlite::Result<()> {
    c.prepare_cached("BEGIN")?.execute([])?;
    c.prepare_cached("SELECT COUNT(*) FROM floor")?
        .query_row([], |_| Ok(()))
}

fn end_read(c: &Connection) {
    if let Ok(mut commit) = c.prepare_cached("COMMIT") {
        let _ = commit.execute([]);
    }
}

/// The frames in the write-ahead log now, whoever wrote them: `mxFrame` of
/// the wal-index header at the start of the shared-memory index (SQLite's
/// documented WAL format, native byte order, version 3007000), read through
/// `c`'s own mapping of it. Never through a file handle of our own on the
/// `-shm` file: closing one would drop every POSIX lock this process holds
/// on it, SQLite's included. `None` when there is no index to read.
fn log_frames(c: &Connection) -> Option<u32> {
    use rusqlite::ffi;
    /// The size of a wal-index region, as SQLite maps them.
    const REGION: std::ffi::c_int = 32 * 1024;
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: `c` is open and used by this thread alone. The file control
    // writes the database's `sqlite3_file` pointer, which lives as long as
    // `c` does; its methods are SQLite's VFS, called as SQLite calls them:
    // `xShmMap` of region 0 at SQLite's own region size, without extending
    // it, hands back SQLite's mapping (made when `c` first read the log).
    // The header is read with relaxed atomic loads of aligned words, as
    // other connections and processes may be writing it; a stale or
    // mid-update value only makes the mark step aside a refresh early or
    // late.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            c.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast(),
        );
        if rc != ffi::SQLITE_OK || file.is_null() {
            return None;
        }
        let methods = (*file).pMethods;
        if methods.is_null() || (*methods).iVersion < 2 {
            return None;
        }
        let map = (*methods).xShmMap?;
        let mut region: *mut std::ffi::c_void = std::ptr::null_mut();
        if map(file, 0, REGION, 0, &raw mut region) != ffi::SQLITE_OK || region.is_null() {
            return None;
        }
        // The region is page-aligned, so each word is aligned for an atomic.
        let word = |i: usize| {
            std::sync::atomic::AtomicU32::from_ptr(region.cast::<u32>().add(i))
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        (word(0) == 3_007_000).then(|| word(4))
    }
}

/// Most writes one transaction takes.
const MAX_BATCH: usize = 512;

/// A write for the writer thread, and where its answer goes.
struct Write {
    op: WriteOp,
    reply: Reply,
}

/// Where a write's answer goes: a blocked thread, or an awaiting task (so
/// an async caller does not hold a thread while its commit is pending).
enum Reply {
    Blocking(mpsc::SyncSender<Result<Version, StoreError>>),
    Async(tokio::sync::oneshot::Sender<Result<Version, StoreError>>),
}

impl Reply {
    fn send(self, answer: Result<Version, StoreError>) {
        match self {
            Reply::Blocking(tx) => {
                let _ = tx.send(answer);
            }
            Reply::Async(tx) => {
                let _ = tx.send(answer);
            }
        }
    }
}

enum WriteOp {
    Put {
        key: String,
        expected: Option<Version>,
        body: String,
        due_at: Option<i64>,
    },
    Delete {
        key: String,
        expected: Version,
    },
}

/// Commits every batch on `conn` until the store is dropped.
fn writer_loop(mut conn: Connection, writes: mpsc::Receiver<Write>) {
    while let Ok(first) = writes.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match writes.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        commit_batch(&mut conn, batch);
    }
}

/// One transaction for `batch`: each write in order, then one commit; the
/// answers go out only after it.
fn commit_batch(conn: &mut Connection, batch: Vec<Write>) {
    let mut answers = Vec::with_capacity(batch.len());
    let outcome = (|| -> Result<(), StoreError> {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(unavailable)?;
        for w in &batch {
            let answer = apply(&tx, &w.op);
            if let Err(e) = &answer
                && tx.is_autocommit()
            {
                // SQLite rolled the whole transaction back (an I/O error, a
                // full disk): nothing of this batch is stored, and the
                // writes after it must not run outside the transaction.
                return Err(e.clone());
            }
            answers.push(answer);
        }
        tx.commit().map_err(unavailable)
    })();
    for (i, w) in batch.into_iter().enumerate() {
        let answer = match &outcome {
            Ok(()) => answers
                .get(i)
                .cloned()
                .unwrap_or_else(|| Err(unavailable("no answer"))),
            Err(e) => Err(e.clone()),
        };
        w.reply.send(answer);
    }
}

/// One write inside the writer's transaction; `Ok` carries the new version
/// (0 for a delete).
fn apply(c: &Connection, op: &WriteOp) -> Result<Version, StoreError> {
    match op {
        WriteOp::Put {
            key,
            expected: None,
            body,
            due_at,
        } => {
            // Above every version a deleted key had (the store contract).
            // Read on its own: an INSERT with a subquery and RETURNING made
            // SQLite open a temporary file for every transaction (measured:
            // 2x the writes per create, 11% fewer creates per second).
            let version: i64 = c
                .prepare_cached("SELECT COALESCE(MAX(version), 0) + 1 FROM floor")
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(unavailable)?;
            conditional(
                c,
                key,
                "INSERT INTO entries (key, version, body, due_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (key) DO NOTHING",
                params![key, version, body, due_at],
                version_of(version)?,
            )
        }
        WriteOp::Put {
            key,
            expected: Some(v),
            body,
            due_at,
        } => {
            let (from, to) = (to_sql(*v)?, to_sql(v + 1)?);
            conditional(
                c,
                key,
                "UPDATE entries SET version = ?3, body = ?4, due_at = ?5 \
                     WHERE key = ?1 AND version = ?2",
                params![key, from, to, body, due_at],
                v + 1,
            )
        }
        WriteOp::Delete { key, expected } => {
            let expected = to_sql(*expected)?;
            // The floor first. A statement that fails may leave the
            // transaction open with the statements before it, which the
            // batch then commits: a floor raised for a delete that did not
            // happen only makes later versions larger, but a delete stored
            // without its floor would let a new entry of the key reuse a
            // version an old writer still holds.
            c.prepare_cached(
                "INSERT INTO floor (one, version) VALUES (0, ?1) \
                 ON CONFLICT (one) DO UPDATE SET version = MAX(version, excluded.version)",
            )
            .and_then(|mut s| s.execute(params![expected]))
            .map_err(unavailable)?;
            conditional(
                c,
                key,
                "DELETE FROM entries WHERE key = ?1 AND version = ?2",
                params![key, expected],
                0,
            )
        }
    }
}

/// Runs one conditional statement on `key`'s row: it changes exactly that
/// row and the write stands (`Ok(version)`), or it changes nothing and the
/// write is refused with the version found.
fn conditional(
    c: &Connection,
    key: &str,
    sql: &str,
    params: impl rusqlite::Params,
    version: Version,
) -> Result<Version, StoreError> {
    let changed = c
        .prepare_cached(sql)
        .and_then(|mut s| s.execute(params))
        .map_err(unavailable)?;
    if changed != 1 {
        return Err(StoreError::Conflict {
            current: current_version(c, key)?,
        });
    }
    Ok(version)
}

/// When a commit reaches the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sync {
    /// `synchronous=FULL`: every commit is fsynced before the write
    /// returns; it survives a power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL` (WAL): a commit survives the host process
    /// being killed, but the last commits before a power loss or kernel
    /// crash may roll back. No fsync per commit.
    Normal,
}

impl std::str::FromStr for Sync {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Sync::Full),
            "normal" => Ok(Sync::Normal),
            _ => Err(format!("unknown sync mode {s:?} (full or normal)")),
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("sqlite: {e}"))
}

fn version_of(v: i64) -> Result<Version, StoreError> {
    Version::try_from(v).map_err(|_| unavailable("negative version in the database"))
}

fn to_sql(v: Version) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| unavailable("version out of range"))
}

/// Turns SQLite's memory statistics off, once, before its first
/// connection: with them on, every allocation of every connection takes
/// one process-wide mutex, which the serving threads' reads then contend
/// for. The host never reads them.
fn no_memory_statistics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_config` may be called before SQLite is
        // initialised, and `Once` runs this before the host opens any
        // connection (the host opens every one through a store). If SQLite
        // was initialised already (another library's connection, or a
        // test's own), it returns SQLITE_MISUSE and changes nothing.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}

/// Creates `dir` (and its parents) readable by this user only (0700); an
/// existing directory is left as it is.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the database file readable and writable by this user only
/// (0600), or narrows an existing one to that. SQLite gives its `-wal` and
/// `-shm` files the database file's mode.
fn private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    drop(options.open(path)?);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            if file.exists() {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
            }
        }
    }
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `dir`: the directory 0700
    /// when created here, the database files 0600.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_with(dir, Sync::Full)
    }

    pub fn open_with(dir: &Path, sync: Sync) -> anyhow::Result<Self> {
        no_memory_statistics();
        private_dir(dir)?;
        private_file(&dir.join(FILE_NAME))?;
        let mut store = SqliteStore {
            path: dir.join(FILE_NAME),
            idle: AffinePool::new(MAX_IDLE),
            sync,
            writer: Mutex::new(None),
            checkpoints: Default::default(),
            outlasted: Default::default(),
            mark: ReadMark::default(),
        };
        // Several processes (or threads) opening a new store at once can
        // find it locked while one of them switches it to WAL, which SQLite
        // reports at once instead of waiting: try again for a while.
        let mut attempt = 0;
        let mut conn = loop {
            match store
                .connect()
                .and_then(|c| c.execute_batch(SCHEMA).map(|()| c))
            {
                Ok(conn) => break conn,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if matches!(
                        e.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && attempt < 100 =>
                {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e.into()),
            }
        };
        // The writer thread owns its connection; checkpoints run on a
        // thread and connection of their own.
        store.checkpoint_elsewhere(&mut conn)?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx))?;
        store.mark = ReadMark::start(&store)?;
        if let Ok(mut w) = store.writer.lock() {
            *w = Some(tx);
        }
        Ok(store)
    }

    /// Moves the write-ahead log's checkpoints off the writer: past
    /// [`CHECKPOINT_AT`] frames, and every [`CHECKPOINT_STEP`] frames after
    /// that, a commit wakes a thread that copies the log back into the
    /// database on its own connection (a passive checkpoint, which never
    /// blocks the writer), while the writer goes on committing. Past
    /// [`CHECKPOINT_CAP`] frames (the thread fell behind, or commits never
    /// left it a moment to finish, so the log could not start over) the
    /// writer checkpoints itself, so the log cannot grow without bound: it
    /// first waits for a run of the thread's to end (a second checkpoint
    /// while one runs would fail at once with `SQLITE_BUSY` and copy
    /// nothing), copies what the thread has not, and then waits up to
    /// [`CAP_WAIT`] for every reader to let the log go (SQLite's restart
    /// checkpoint), so the next commit starts it over. A read mark held
    /// anywhere, even for a moment past the cap, would otherwise let the log
    /// grow by every commit made while it is held. A reader that outlasts
    /// the wait is waited for again only once the log has grown by another
    /// [`CHECKPOINT_CAP`] frames.
    fn checkpoint_elsewhere(&self, writer: &mut Connection) -> anyhow::Result<()> {
        let checkpointer = self.connect()?;
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        // Held by whichever of the two is checkpointing.
        let running = Arc::new(Mutex::new(()));
        let (theirs, runs) = (running.clone(), self.checkpoints.clone());
        let outlasted = self.outlasted.clone();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    let _running = theirs.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = checkpointer
                        .wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
                    runs.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        // The writer's lock waits last up to `BUSY_TIMEOUT`, its wait for
        // readers at the cap up to `CAP_WAIT`. SQLite counts a call's
        // retries from 0, so the first one marks the wait's start.
        let at_cap = Arc::new(AtomicBool::new(false));
        let waiting = at_cap.clone();
        let mut since = std::time::Instant::now();
        writer.busy_handler(Some(move |tries: i32| {
            let now = std::time::Instant::now();
            if tries == 0 {
                since = now;
            }
            let limit = match waiting.load(Ordering::Relaxed) {
                true => CAP_WAIT,
                false => BUSY_TIMEOUT,
            };
            let left = limit.saturating_sub(now.duration_since(since));
            let pause = Duration::from_millis(1 << tries.clamp(0, 4));
            std::thread::sleep(pause.min(left));
            !left.is_zero()
        }))?;
        // The log's length at which the next commit wakes the thread, its
        // length after the last commit, and the length at which the writer
        // next waits for readers.
        let (mut next, mut last, mut wait_at) = (CHECKPOINT_AT, 0, CHECKPOINT_CAP);
        writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, frames| {
            if frames < last || frames < CHECKPOINT_AT {
                // The log started over.
                (next, wait_at) = (CHECKPOINT_AT, CHECKPOINT_CAP);
            }
            last = frames;
            if frames >= CHECKPOINT_CAP {
                let _running = running.lock().unwrap_or_else(|e| e.into_inner());
                // An error here would make the commit that is already
                // durable report failure: leave it to the next commit.
                if frames >= wait_at {
                    at_cap.store(true, Ordering::Relaxed);
                    let restarted = wal.checkpoint_v2(rusqlite::wal::CheckpointMode::RESTART);
                    at_cap.store(false, Ordering::Relaxed);
                    if restarted.is_err() {
                        outlasted.fetch_add(1, Ordering::Relaxed);
                        wait_at = frames.saturating_add(CHECKPOINT_CAP);
                    }
                } else {
                    let _ = wal.checkpoint();
                }
            } else if frames >= next {
                let _ = wake.try_send(());
                next = frames + CHECKPOINT_STEP;
            }
            Ok(())
        }))?;
        Ok(())
    }

    fn submit(&self, op: WriteOp, reply: Reply) -> Result<(), StoreError> {
        let sender = self
            .writer
            .lock()
            .ok()
            .and_then(|w| w.clone())
            .ok_or_else(|| unavailable("the writer is gone"))?;
        sender
            .send(Write { op, reply })
            .map_err(|_| unavailable("the writer is gone"))
    }

    /// Sends `op` to the writer and blocks until its transaction committed.
    fn write(&self, op: WriteOp) -> Result<Version, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.submit(op, Reply::Blocking(reply))?;
        answer
            .recv()
            .map_err(|_| unavailable("the writer stopped"))?
    }

    /// Sends `op` to the writer and awaits its commit without holding a
    /// thread: concurrent requests keep running, and their writes join the
    /// same commit.
    async fn write_async(&self, op: WriteOp) -> Result<Version, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.submit(op, Reply::Async(reply))?;
        answer
            .await
            .map_err(|_| unavailable("the writer stopped"))?
    }

    /// [`SqliteStore::put`], awaiting the commit.
    pub async fn put_async(
        &self,
        key: &str,
        expected: Option<Version>,
        body: String,
        due_at: Option<i64>,
    ) -> Result<Version, StoreError> {
        self.write_async(WriteOp::Put {
            key: key.to_owned(),
            expected,
            body,
            due_at,
        })
        .await
    }

    /// [`SqliteStore::delete`], awaiting the commit.
    pub async fn delete_async(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.write_async(WriteOp::Delete {
            key: key.to_owned(),
            expected,
        })
        .await
        .map(|_| ())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of every stored body together, and the number of entries (for
    /// tests, benchmarks and operators).
    pub fn stored(&self) -> Result<(u64, u64), StoreError> {
        let conn = self.acquire()?;
        let r = conn
            .query_row(
                "SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0), COUNT(*) FROM entries",
                [],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
            )
            .map_err(unavailable);
        self.release(conn);
        let (bytes, n) = r?;
        Ok((bytes.max(0) as u64, n.max(0) as u64))
    }

    fn connect(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Takes effect only while the file is empty (a new store); an
        // existing store keeps the page size it was created with.
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        let sync = match self.sync {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", sync)?;
        Ok(conn)
    }

    fn acquire(&self) -> Result<Connection, StoreError> {
        match self.idle.take() {
            Some(conn) => Ok(conn),
            None => self.connect().map_err(unavailable),
        }
    }

    fn release(&self, conn: Connection) {
        self.idle.put(conn);
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.mark.touch();
        let mut conn = self.acquire()?;
        let result = f(&mut conn);
        self.release(conn);
        result
    }

    pub fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.with(|c| {
            // Every statement is prepared once per connection and reused.
            let row = c
                .prepare_cached("SELECT version, body, due_at FROM entries WHERE key = ?1")
                .map_err(unavailable)?
                .query_row([key], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                    ))
                })
                .optional()
                .map_err(unavailable)?;
            row.map(|(version, body, due_at)| {
                Ok(Entry {
                    version: version_of(version)?,
                    body,
                    due_at,
                })
            })
            .transpose()
        })
    }

    pub fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<i64>,
    ) -> Result<Version, StoreError> {
        self.write(WriteOp::Put {
            key: key.to_owned(),
            expected,
            body: body.to_owned(),
            due_at,
        })
    }

    pub fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        self.write(WriteOp::Delete {
            key: key.to_owned(),
            expected,
        })
        .map(|_| ())
    }

    pub fn due(&self, now: i64, limit: u32) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT key FROM entries WHERE due_at IS NOT NULL AND due_at <= ?1 \
                     ORDER BY due_at, key LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![now, limit], |r| r.get::<_, String>(0))
                .map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    pub fn next_due(&self) -> Result<Option<i64>, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT MIN(due_at) FROM entries WHERE due_at IS NOT NULL")
                .and_then(|mut s| s.query_row([], |r| r.get::<_, Option<i64>>(0)))
                .map_err(unavailable)
        })
    }
}

fn current_version(c: &Connection, key: &str) -> Result<Option<Version>, StoreError> {
    c.prepare_cached("SELECT version FROM entries WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| r.get::<_, i64>(0)))
        .optional()
        .map_err(unavailable)?
        .map(version_of)
        .transpose()
}

/// The core trait over the same operations, so the contract suite can also
/// run against this store natively (without the component in between).
impl Store for SqliteStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        SqliteStore::get(self, key)
    }
    async fn put(
        &self,
        key: &str,
        expected: Option<Version>,
        body: &str,
        due_at: Option<i64>,
    ) -> Result<Version, StoreError> {
        SqliteStore::put(self, key, expected, body, due_at)
    }
    async fn delete(&self, key: &str, expected: Version) -> Result<(), StoreError> {
        SqliteStore::delete(self, key, expected)
    }
    async fn due(&self, now: i64, limit: usize) -> Result<Vec<String>, StoreError> {
        SqliteStore::due(self, now, u32::try_from(limit).unwrap_or(u32::MAX))
    }
    async fn next_due(&self) -> Result<Option<i64>, StoreError> {
        SqliteStore::next_due(self)
    }
}

#[cfg(test)]
mod tests {
    /// An empty path under the temporary directory, unique to this process
    /// and `name`, with whatever an earlier run left there removed.
    fn fresh_dir(name: &str) -> std::path::PathBuf {
        let base = std::env::temp_dir().join(format!("mte-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        base
    }

    /// SQLite takes the setting only before its first connection in a
    /// process, and other tests here open connections of their own, so the
    /// check runs alone in a process of its own, as the host does.
    #[test]
    fn sqlite_keeps_no_memory_statistics() {
        let inner = "sqlite::tests::memory_statistics_in_a_fresh_process";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", inner, "--ignored", "--test-threads", "1"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    #[ignore = "run in a process of its own by sqlite_keeps_no_memory_statistics"]
    fn memory_statistics_in_a_fresh_process() {
        let base = fresh_dir("memstatus");
        let store = super::SqliteStore::open(&base).unwrap();
        store.get("absent").unwrap();
        let (mut current, mut highest) = (-1i64, -1i64);
        // SAFETY: two valid pointers to `i64`s for SQLite to write.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_status64(
                rusqlite::ffi::SQLITE_STATUS_MEMORY_USED,
                &mut current,
                &mut highest,
                0,
            )
        };
        assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
        assert_eq!(
            current, 0,
            "SQLite counts its memory, so every allocation takes its global mutex"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[test]
    fn the_store_is_private_to_its_user() {
        use std::os::unix::fs::PermissionsExt;
        let base = fresh_dir("private");
        let dir = base.join("data");
        let store = super::SqliteStore::open(&dir).unwrap();
        mcp_tasks_edge::block_on(mcp_tasks_edge::store::Store::put(
            &store, "k", None, "{}", None,
        ))
        .unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        for name in ["tasks.sqlite3", "tasks.sqlite3-wal", "tasks.sqlite3-shm"] {
            assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
        }
        drop(store);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// Past `CHECKPOINT_AT` frames the log is copied back into the database
    /// by the checkpoint thread, long before the writer's own cap.
    #[test]
    fn the_log_is_checkpointed_beside_the_writer() {
        let base = fresh_dir("ckpt");
        let store = super::SqliteStore::open_with(&base, super::Sync::Normal).unwrap();
        let db = base.join(super::FILE_NAME);
        let size = || std::fs::metadata(&db).unwrap().len();
        let before = size();
        // One small row per commit: about one frame each.
        let commits = super::CHECKPOINT_AT + super::CHECKPOINT_AT / 2;
        assert!(commits < super::CHECKPOINT_CAP / 2);
        for i in 0..commits {
            store.put(&format!("k{i}"), None, "{}", None).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let runs = || store.checkpoints.load(super::Ordering::Relaxed);
        while (size() <= before || runs() == 0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            size() > before,
            "nothing was checkpointed: {} bytes",
            size()
        );
        // The thread did it, not SQLite's own checkpoint on the writer.
        assert!(runs() > 0, "the checkpoint thread never ran");
        drop(store);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// 16,000 puts of 2,000 bytes from four threads at once, each put
    /// sent as soon as the last one returned.
    fn write_without_pause(store: &std::sync::Arc<super::SqliteStore>) {
        let body = "x".repeat(2000);
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let (store, body) = (store.clone(), body.clone());
                std::thread::spawn(move || {
                    for i in 0..4000 {
                        store.put(&format!("t{t}-{i}"), None, &body, None).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
    }

    /// The store's log in `base` never reached past its cap by more than a
    /// batch or two.
    fn assert_log_bounded(base: &std::path::Path) {
        // A frame is a page and its 24-byte header, after the 32-byte
        // file header; one batch may land past the cap.
        let frame = super::PAGE_SIZE as u64 + 24;
        let bound = 32 + frame * (super::CHECKPOINT_CAP as u64 + 2 * super::MAX_BATCH as u64);
        let wal = base.join(format!("{}-wal", super::FILE_NAME));
        let len = std::fs::metadata(&wal).unwrap().len();
        assert!(len <= bound, "the log grew to {len} bytes (bound {bound})");
    }

    /// Under writes that never pause, the log stays bounded: the writer's
    /// cap takes over when the checkpoint thread cannot finish.
    #[test]
    fn the_log_stays_bounded_under_writes_that_never_pause() {
        let base = fresh_dir("wal-cap");
        let store =
            std::sync::Arc::new(super::SqliteStore::open_with(&base, super::Sync::Normal).unwrap());
        write_without_pause(&store);
        assert_log_bounded(&base);
        assert_eq!(store.stored().unwrap().1, 16_000);
        drop(store);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// Reads get the held read mark, and it goes once they stop: nothing
    /// then holds the log, so a checkpoint that needs every reader gone
    /// finishes at once.
    #[test]
    fn a_read_mark_is_held_while_reads_go_on_and_let_go_after() {
        let base = fresh_dir("read-mark");
        let store = super::SqliteStore::open(&base).unwrap();
        store.put("k", None, "v", None).unwrap();
        let until = |held: bool, reading: bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::time::Instant::now() < deadline {
                if reading {
                    assert!(store.get("k").unwrap().is_some());
                }
                if store.mark.held() == held {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            false
        };
        assert!(until(true, true), "reads never got a held mark");
        assert!(until(false, false), "the mark outlived the reads");
        let c = rusqlite::Connection::open(base.join(super::FILE_NAME)).unwrap();
        c.busy_timeout(std::time::Duration::ZERO).unwrap();
        let busy: i64 = c
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .unwrap();
        assert_eq!(busy, 0, "a reader still holds the log");
        drop((c, store));
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A store that only reads lets the log of another that writes on the
    /// same file (another process, in production) start over: its held
    /// mark steps aside as the log grows.
    #[test]
    fn the_log_stays_bounded_while_another_store_reads() {
        let base = fresh_dir("wal-reader");
        let writer =
            std::sync::Arc::new(super::SqliteStore::open_with(&base, super::Sync::Normal).unwrap());
        let reader = std::sync::Arc::new(super::SqliteStore::open(&base).unwrap());
        writer.put("seen", None, "v", None).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (reader, done) = (reader.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut held = false;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        assert!(reader.get("seen").unwrap().is_some());
                        held |= reader.mark.held();
                    }
                    held
                })
            })
            .collect();
        write_without_pause(&writer);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let held = readers
            .into_iter()
            .fold(false, |a, r| r.join().unwrap() | a);
        assert!(held, "the reading store never held a mark");
        assert_log_bounded(&base);
        drop((writer, reader));
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A connection of its own (another process's, in production) with a
    /// read transaction open on the log's newest mark, until it commits.
    fn reader_holding_the_log(base: &std::path::Path) -> rusqlite::Connection {
        let c = rusqlite::Connection::open(base.join(super::FILE_NAME)).unwrap();
        c.execute_batch("BEGIN").unwrap();
        let _: i64 = c
            .query_row("SELECT COUNT(*) FROM entries", [], |r| r.get(0))
            .unwrap();
        c
    }

    /// A reader of another process that holds its snapshot past the cap
    /// (here for 300 ms after the log reached it) holds the writer at the
    /// cap, not the log: the writer waits for it to let go, so the log
    /// starts over instead of growing by every write made meanwhile.
    #[test]
    fn the_writer_waits_at_the_cap_for_a_reader_that_holds_the_log() {
        let base = fresh_dir("wal-held");
        let writer =
            std::sync::Arc::new(super::SqliteStore::open_with(&base, super::Sync::Normal).unwrap());
        writer.put("seen", None, "v", None).unwrap();
        let wal = base.join(format!("{}-wal", super::FILE_NAME));
        let cap = 32 + (super::PAGE_SIZE as u64 + 24) * super::CHECKPOINT_CAP as u64;
        let c = reader_holding_the_log(&base);
        let reader = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while std::fs::metadata(&wal).map_or(0, |m| m.len()) < cap
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            c.execute_batch("COMMIT").unwrap();
        });
        write_without_pause(&writer);
        reader.join().unwrap();
        assert_log_bounded(&base);
        assert_eq!(writer.stored().unwrap().1, 16_001);
        drop(writer);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A reader that never lets go costs the writer one wait at the cap,
    /// and one more per cap's worth of frames the log grows by meanwhile:
    /// every write still lands.
    #[test]
    fn a_reader_that_never_lets_go_is_waited_for_once_per_cap() {
        let base = fresh_dir("wal-stuck");
        let writer =
            std::sync::Arc::new(super::SqliteStore::open_with(&base, super::Sync::Normal).unwrap());
        writer.put("seen", None, "v", None).unwrap();
        let c = reader_holding_the_log(&base);
        let cap = super::CHECKPOINT_CAP.unsigned_abs();
        let body = "x".repeat(2000);
        let mut puts = 0;
        let waits = || writer.outlasted.load(super::Ordering::Relaxed);
        // Past two caps, or stopped early by a wait too many.
        while super::log_frames(&c).unwrap() <= 2 * cap && waits() <= 2 {
            writer.put(&format!("k{puts}"), None, &body, None).unwrap();
            puts += 1;
        }
        let frames = super::log_frames(&c).unwrap();
        c.execute_batch("COMMIT").unwrap();
        let waits = waits();
        assert!(
            (1..=u64::from(frames / cap)).contains(&waits),
            "{waits} waits for a log of {frames} frames"
        );
        assert_eq!(writer.stored().unwrap().1, puts + 1);
        drop(writer);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A new store has the larger pages; a store created with SQLite's
    /// default keeps its own and reads and writes as before.
    #[test]
    fn a_new_store_has_large_pages_and_an_old_one_keeps_its_own() {
        let base = fresh_dir("pages");
        let page_size = |dir: &std::path::Path| -> i64 {
            rusqlite::Connection::open(dir.join(super::FILE_NAME))
                .unwrap()
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap()
        };
        let fresh = base.join("fresh");
        let store = super::SqliteStore::open(&fresh).unwrap();
        store.put("k", None, "{}", None).unwrap();
        drop(store);
        assert_eq!(page_size(&fresh), super::PAGE_SIZE);

        let old = base.join("old");
        std::fs::create_dir_all(&old).unwrap();
        {
            let c = rusqlite::Connection::open(old.join(super::FILE_NAME)).unwrap();
            c.pragma_update(None, "journal_mode", "WAL").unwrap();
            c.execute_batch(super::SCHEMA).unwrap();
            c.execute(
                "INSERT INTO entries (key, version, body, due_at) VALUES ('a', 3, 'before', 7)",
                [],
            )
            .unwrap();
        }
        assert_eq!(page_size(&old), 4096);
        let store = super::SqliteStore::open(&old).unwrap();
        let a = store.get("a").unwrap().unwrap();
        assert_eq!(
            (a.version, a.body.as_str(), a.due_at),
            (3, "before", Some(7))
        );
        let body = "x".repeat(3000);
        assert_eq!(store.put("a", Some(3), &body, None), Ok(4));
        assert_eq!(store.get("a").unwrap().unwrap().body, body);
        drop(store);
        assert_eq!(page_size(&old), 4096);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A write that fails for want of space (`SQLITE_FULL`) inside a batch:
    /// whatever SQLite then rolls back, every write answered `Ok` is stored
    /// and every write answered with an error is not.
    #[test]
    fn a_batch_that_runs_out_of_space_stores_exactly_what_it_acknowledged() {
        use super::{Reply, Write, WriteOp, commit_batch};
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(super::SCHEMA).unwrap();
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.pragma_update(None, "max_page_count", pages + 2)
            .unwrap();
        let mut conn = conn;
        let put = |key: &str, size: usize| WriteOp::Put {
            key: key.to_owned(),
            expected: None,
            body: "x".repeat(size),
            due_at: Some(1),
        };
        let ops = [put("a", 10), put("big", 200_000), put("c", 10)];
        let keys = ["a", "big", "c"];
        let mut answers = Vec::new();
        let batch = ops
            .into_iter()
            .map(|op| {
                let (tx, rx) = std::sync::mpsc::sync_channel(1);
                answers.push(rx);
                Write {
                    op,
                    reply: Reply::Blocking(tx),
                }
            })
            .collect();
        commit_batch(&mut conn, batch);
        let answers: Vec<_> = answers.iter().map(|rx| rx.recv().unwrap()).collect();
        assert!(answers[1].is_err(), "{answers:?}");
        for (key, answer) in keys.iter().zip(&answers) {
            let stored: i64 = conn
                .query_row("SELECT COUNT(*) FROM entries WHERE key = ?1", [key], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(stored == 1, answer.is_ok(), "{key}: {answer:?}");
        }
    }

    /// A delete is two statements (the version floor, the row). Either may
    /// fail alone, as a full disk can make one statement fail and leave the
    /// transaction open, and the batch then commits what ran before it:
    /// what is stored must still be the answer given, and a key made again
    /// must get a version above the one deleted.
    #[test]
    fn a_delete_that_fails_part_way_stores_what_it_answered() {
        use super::{Reply, Write, WriteOp, commit_batch};
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(super::SCHEMA).unwrap();
        let write = |conn: &mut rusqlite::Connection, op: WriteOp| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            commit_batch(
                conn,
                vec![Write {
                    op,
                    reply: Reply::Blocking(tx),
                }],
            );
            rx.recv().unwrap()
        };
        let put = |expected| WriteOp::Put {
            key: "k".to_owned(),
            expected,
            body: "x".to_owned(),
            due_at: None,
        };
        let delete = |expected| WriteOp::Delete {
            key: "k".to_owned(),
            expected,
        };
        let stored = |conn: &rusqlite::Connection| -> Option<i64> {
            conn.query_row("SELECT version FROM entries WHERE key = 'k'", [], |r| {
                r.get(0)
            })
            .ok()
        };
        assert_eq!(write(&mut conn, put(None)), Ok(1));
        assert_eq!(write(&mut conn, put(Some(1))), Ok(2));
        for (table, when) in [
            ("floor", "INSERT"),
            ("floor", "UPDATE"),
            ("entries", "DELETE"),
        ] {
            conn.execute_batch(&format!(
                "CREATE TRIGGER refuse BEFORE {when} ON {table} \
                 BEGIN SELECT RAISE(ABORT, 'refused'); END;"
            ))
            .unwrap();
            let answer = write(&mut conn, delete(2));
            assert!(answer.is_err(), "{table} {when}: {answer:?}");
            assert_eq!(stored(&conn), Some(2), "{table} {when}: still there");
            conn.execute_batch("DROP TRIGGER refuse").unwrap();
            if when == "INSERT" {
                // The floor's row exists from here on: the next case
                // refuses its update.
                conn.execute("INSERT INTO floor (one, version) VALUES (0, 0)", [])
                    .unwrap();
            }
        }
        assert_eq!(write(&mut conn, delete(2)), Ok(0));
        assert_eq!(stored(&conn), None);
        assert_eq!(
            write(&mut conn, put(None)),
            Ok(3),
            "above the version deleted"
        );
    }
}
