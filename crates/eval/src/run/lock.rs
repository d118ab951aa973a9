//! The run directory's lock: one `ruler` process writes into a directory at a time, or two
//! runs would interleave their predictions and a resume would count samples twice.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::run::error::RunError;

/// Inside the run directory; holds the pid of the process that has the lock.
pub const LOCK_FILE: &str = ".lock";

/// An exclusive advisory lock (flock on Unix) on `DIR/.lock`, released when dropped or when
/// the process ends, however it ends. The file itself stays: a stale file locks nothing.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock or fails at once, naming the process that holds it.
    pub fn acquire(dir: &Path) -> Result<RunLock, RunError> {
        let path = dir.join(LOCK_FILE);
        let io = RunError::io(&path);
        let mut file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) => return Err(io(e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "another process".to_string(),
                    pid => format!("process {pid}"),
                };
                return Err(RunError::Locked {
                    path: dir.to_path_buf(),
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let pid = std::process::id().to_string();
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .and_then(|()| file.flush())
            .map_err(RunError::io(&path))?;
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_fails_naming_the_holder_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file, so a second open in one process conflicts too.
        let err = RunLock::acquire(dir.path()).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("process {}", std::process::id())),
            "{message}"
        );
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }
}
