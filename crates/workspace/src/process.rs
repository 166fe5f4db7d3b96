//! Background processes: started by `shell` with `background=true`, polled
//! with `read_process_output`, stopped with `kill_process`. Their output
//! (stdout and stderr merged) goes to a tail buffer; they have no timeout
//! and die with the session. A session holds a bounded number of them.

use crate::output::TailBuffer;
use crate::shell::kill_group;
use crate::text;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncReadExt;
use tokio::process::Child;

/// Finished processes whose output was read are forgotten beyond this many.
const KEPT_FINISHED: usize = 32;

/// A background process's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Running,
    Exited(i32),
    Killed,
}

impl Status {
    /// `running`, `killed`, `exited with code N`.
    pub(crate) fn describe(self) -> String {
        match self {
            Status::Running => "running".to_owned(),
            Status::Killed => "killed".to_owned(),
            Status::Exited(code) => format!("exited with code {code}"),
        }
    }
}

#[derive(Debug)]
struct State {
    status: Status,
    output: TailBuffer,
    /// Whether the model read its output after it ended.
    final_read: bool,
    /// Output streams still open.
    open_streams: u8,
}

/// One background process.
#[derive(Debug)]
pub(crate) struct Background {
    pub(crate) id: String,
    pub(crate) command: String,
    pub(crate) pid: u32,
    seq: u64,
    state: Mutex<State>,
    /// The kernel confinement, kept while the process lives (its pids
    /// cgroup and private temporary directory); `None` when unconfined.
    confined: Option<crate::shell::Confined>,
}

impl Background {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The status.
    pub(crate) fn status(&self) -> Status {
        self.lock().status
    }

    /// `process <id>: <status>`, the dropped notice, then the new output or
    /// `(no new output)`. After the end, the read counts as the final one
    /// once both streams are closed.
    pub(crate) fn read(&self) -> String {
        let mut state = self.lock();
        let (output, dropped) = state.output.take();
        if state.status != Status::Running && state.open_streams == 0 {
            state.final_read = true;
        }
        let mut text = format!("process {}: {}", self.id, state.status.describe());
        if dropped {
            text.push('\n');
            text.push_str(text::DROPPED);
        }
        text.push('\n');
        if output.is_empty() {
            text.push_str("(no new output)");
        } else {
            text.push_str(&output);
        }
        text
    }

    /// Kills its group; a process that already ended keeps its status.
    pub(crate) fn kill(&self) {
        let mut state = self.lock();
        if state.status == Status::Running {
            kill_group(self.pid);
            if let Some(confined) = &self.confined {
                confined.kill_all();
            }
            state.status = Status::Killed;
        }
    }
}

/// The session's background processes, by id.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    all: Mutex<BTreeMap<String, Arc<Background>>>,
    next_seq: std::sync::atomic::AtomicU64,
}

/// Why a background process could not be registered.
#[derive(Debug)]
pub(crate) struct TooMany(pub(crate) usize);

impl Processes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Background>>> {
        self.all.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether another process fits: running ones and finished ones whose
    /// output was not read yet count against `limit`.
    pub(crate) fn check_room(&self, limit: usize) -> Result<(), TooMany> {
        let live = self
            .lock()
            .values()
            .filter(|b| {
                let s = b.lock();
                s.status == Status::Running || !s.final_read
            })
            .count();
        if live >= limit { Err(TooMany(limit)) } else { Ok(()) }
    }

    /// Registers a started child and its output readers; returns its id.
    pub(crate) fn register(
        &self,
        mut child: Child,
        confined: Option<crate::shell::Confined>,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
        command: &str,
        limit_chars: usize,
    ) -> Arc<Background> {
        let pid = child.id().unwrap_or(0);
        let id = loop {
            let mut bytes = [0u8; 3];
            if getrandom::fill(&mut bytes).is_err() {
                // No randomness: the sequence still gives a unique id.
                let n = self.next_seq.load(std::sync::atomic::Ordering::Relaxed);
                bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            }
            let id = format!("bg-{}", hex::encode(bytes));
            if !self.lock().contains_key(&id) {
                break id;
            }
        };
        let streams = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ];
        let seq = self.next_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let background = Arc::new(Background {
            id: id.clone(),
            command: command.to_owned(),
            pid,
            seq,
            state: Mutex::new(State {
                status: Status::Running,
                output: TailBuffer::new(limit_chars),
                final_read: false,
                open_streams: streams.iter().flatten().count() as u8,
            }),
            confined,
        });
        for stream in streams.into_iter().flatten() {
            let bg = background.clone();
            tokio::spawn(async move {
                let mut stream = stream;
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    bg.lock().output.push(&buf[..n]);
                }
                bg.lock().open_streams -= 1;
            });
        }
        let bg = background.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let code = match status {
                Ok(s) => s.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt;
                    -s.signal().unwrap_or(0)
                }),
                Err(_) => -1,
            };
            let mut state = bg.lock();
            if state.status == Status::Running {
                state.status = Status::Exited(code);
            }
            drop(state);
            // What the shell left behind in its group ends with it (and,
            // confined, whatever left the group: its cgroup knows).
            kill_group(bg.pid);
            if let Some(confined) = &bg.confined {
                confined.kill_all();
            }
            // Its place among the shared bounds' running commands is free again.
            drop(permit);
        });
        let mut all = self.lock();
        all.insert(id, background.clone());
        // Forget the oldest finished, read processes beyond the bound.
        let mut done: Vec<(u64, String)> = all
            .values()
            .filter(|b| {
                let s = b.lock();
                s.status != Status::Running && s.final_read
            })
            .map(|b| (b.seq, b.id.clone()))
            .collect();
        done.sort();
        let excess = done.len().saturating_sub(KEPT_FINISHED);
        for (_, id) in done.into_iter().take(excess) {
            all.remove(&id);
        }
        background
    }

    /// The process `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Background>> {
        self.lock().get(id).cloned()
    }

    /// Every process, oldest first.
    pub(crate) fn list(&self) -> Vec<Arc<Background>> {
        let mut all: Vec<_> = self.lock().values().cloned().collect();
        all.sort_by_key(|b| b.seq);
        all
    }

    /// Kills every running process (the session's end).
    pub(crate) fn kill_all(&self) {
        for bg in self.lock().values() {
            bg.kill();
        }
    }

    /// The failure for an unknown id, naming the known processes.
    pub(crate) fn unknown(&self, id: &str) -> lovia_host::Failure {
        let all = self.list();
        if all.is_empty() {
            return text::failure(
                format!("Unknown process id: '{id}' — no background processes exist in this session."),
                Some(text::NO_PROCESSES_HINT),
            );
        }
        let known: Vec<String> = all
            .iter()
            .map(|b| format!("{} ({}: {})", b.id, b.status().describe(), text::first_chars(&b.command, 40)))
            .collect();
        text::failure(format!("Unknown process id: '{id}'."), Some(&format!("Known processes: {}", known.join(", "))))
    }

    /// The reminder of running processes and of finished ones whose final
    /// output was not read; `None` when there is nothing to say.
    pub(crate) fn reminder(&self) -> Option<String> {
        let lines: Vec<String> = self
            .list()
            .iter()
            .filter_map(|b| {
                let state = b.lock();
                let cmd = text::first_chars(&b.command, 60);
                match state.status {
                    Status::Running => Some(format!("- {} running: {cmd}", b.id)),
                    Status::Exited(code) if !state.final_read => Some(format!(
                        "- {} exited (exit code {code}): {cmd} — call read_process_output('{}') for its final output",
                        b.id, b.id
                    )),
                    _ => None,
                }
            })
            .collect();
        if lines.is_empty() {
            return None;
        }
        Some(format!("<system-reminder>\nBackground processes:\n{}\n</system-reminder>", lines.join("\n")))
    }
}
