//! One PostgreSQL connection on a thread of its own. The `postgres` crate
//! runs its own runtime, which must not nest inside a service's, so its
//! client lives here and callers send it jobs. Shared by the run store and
//! lovia-serve's store of uploaded plugins.

use std::sync::{Mutex, mpsc};

type Job = Box<dyn FnOnce(&mut postgres::Client) + Send>;

/// A connection thread: it connects, runs `schema` (which must be safe to
/// run again), then runs jobs in order, connecting again before a job when
/// the connection has dropped.
#[derive(Debug)]
pub struct PgThread {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl PgThread {
    /// Starts the thread `name` and waits for its first connection; the
    /// error is the server's message ([`pg_message`]) or why the thread
    /// could not start.
    pub fn start(config: postgres::Config, schema: &'static str, name: &str) -> Result<PgThread, String> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let connect = || -> Result<postgres::Client, postgres::Error> {
                    let mut client = config.connect(postgres::NoTls)?;
                    client.batch_execute(schema)?;
                    Ok(client)
                };
                let mut client = match connect() {
                    Ok(c) => {
                        let _ = ready.send(Ok(()));
                        c
                    }
                    Err(e) => {
                        let _ = ready.send(Err(pg_message(&e)));
                        return;
                    }
                };
                while let Ok(job) = queue.recv() {
                    // A dropped connection is made again for the next job.
                    if client.is_closed()
                        && let Ok(c) = connect()
                    {
                        client = c;
                    }
                    job(&mut client);
                }
            })
            .map_err(|e| e.to_string())?;
        match started.recv() {
            Ok(Ok(())) => Ok(PgThread { jobs: Mutex::new(jobs) }),
            Ok(Err(message)) => Err(message),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Queues `job`; false when the thread has stopped.
    pub fn send(&self, job: impl FnOnce(&mut postgres::Client) + Send + 'static) -> bool {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(job)).is_ok()
    }
}

/// The server's own message when there is one (`postgres::Error` alone
/// prints only `db error`), else the error and its cause.
pub fn pg_message(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}
