//! `run --out DIR`: results written as `DIR/NAME.npy`, all or nothing.
//!
//! [`OutDir::prepare`] checks the directory before the run: it exists or
//! can be created, is a directory, a file can be created in it, and every
//! result's file name fits. [`OutDir::write`] writes every result to a
//! temporary file in the directory (created new, so it never follows a
//! link), syncs it, and only when every one is complete renames each onto
//! its `NAME.npy`. A rename replaces whatever `NAME.npy` was, a symbolic
//! link included, and never writes through it. When a write fails, every
//! temporary file is removed and no `NAME.npy` has changed.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::CliError;
use crate::npy;

/// The longest file name most file systems accept, in bytes.
const MAX_FILE_NAME: usize = 255;

/// A checked output directory.
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
}

/// One result to write.
pub struct ResultFile<'a> {
    /// The tensor's name: the file is `NAME.npy`.
    pub name: &'a str,
    /// The array's shape (memory order).
    pub shape: Vec<u64>,
    /// The values.
    pub data: &'a [f32],
    /// For a ragged result, where each row starts along the first axis of
    /// `shape` (then the total): written beside the values as
    /// `NAME.offsets.npy` (int64).
    pub offsets: Option<&'a [u64]>,
}

fn write_error(path: &Path, source: std::io::Error) -> CliError {
    CliError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn refused(path: &Path, why: &str) -> CliError {
    write_error(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string()),
    )
}

/// A temporary file's name: hidden, unique to this process, and short
/// whatever the result's name.
fn temporary(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!(".shapec-{}-{i}.npy.tmp", std::process::id()))
}

impl OutDir {
    /// Checks (and creates when missing) the directory `dir` for results
    /// named `names` with `shapes`, before anything runs.
    pub fn prepare(dir: &Path, results: &[(&str, Vec<u64>)]) -> Result<OutDir, CliError> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(refused(dir, "it exists and is not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
            }
            Err(e) => return Err(write_error(dir, e)),
        }
        for (name, shape) in results {
            // Room for a ragged result's `NAME.offsets.npy` too.
            let file = format!("{name}.npy");
            if file.len() + ".offsets".len() > MAX_FILE_NAME {
                return Err(refused(
                    &dir.join(format!("{}....npy", &name[..16.min(name.len())])),
                    &format!(
                        "the file name of `{}...` is {} bytes long, more than the {MAX_FILE_NAME} a file system allows",
                        &name[..16.min(name.len())],
                        file.len() + ".offsets".len()
                    ),
                ));
            }
            if npy::header_len(shape) > npy::MAX_WRITTEN_HEADER_BYTES {
                return Err(refused(
                    &dir.join(&file),
                    &format!(
                        "`{name}` has {} axes, too many for a .npy header ({} bytes at most)",
                        shape.len(),
                        npy::MAX_WRITTEN_HEADER_BYTES
                    ),
                ));
            }
        }
        // A file can be created there.
        let probe = temporary(dir, usize::MAX);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(|e| write_error(dir, e))?;
        std::fs::remove_file(&probe).map_err(|e| write_error(&probe, e))?;
        Ok(OutDir {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes every result, all or nothing; returns how many were written.
    pub fn write(&self, results: &[ResultFile<'_>]) -> Result<usize, CliError> {
        let mut staged: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(results.len());
        let cleanup = |staged: &[(PathBuf, PathBuf)]| {
            for (tmp, _) in staged {
                let _ = std::fs::remove_file(tmp);
            }
        };
        let mut files: Vec<(String, Contents<'_>)> = Vec::with_capacity(results.len());
        for r in results {
            files.push((
                format!("{}.npy", r.name),
                Contents::Values(&r.shape, r.data),
            ));
            if let Some(offsets) = r.offsets {
                files.push((
                    format!("{}.offsets.npy", r.name),
                    Contents::Offsets(offsets),
                ));
            }
        }
        for (i, (file_name, contents)) in files.iter().enumerate() {
            let tmp = temporary(&self.dir, i);
            let dest = self.dir.join(file_name);
            let written = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|file| {
                    staged.push((tmp.clone(), dest.clone()));
                    write_file(file, contents)
                });
            if let Err(e) = written {
                cleanup(&staged);
                return Err(write_error(&dest, e));
            }
        }
        for (k, (tmp, dest)) in staged.iter().enumerate() {
            if let Err(e) = std::fs::rename(tmp, dest) {
                cleanup(&staged[k..]);
                let done: Vec<String> = staged[..k]
                    .iter()
                    .map(|(_, d)| d.display().to_string())
                    .collect();
                let e = if done.is_empty() {
                    e
                } else {
                    std::io::Error::new(
                        e.kind(),
                        format!("{e} (already replaced: {})", done.join(", ")),
                    )
                };
                return Err(write_error(dest, e));
            }
        }
        Ok(staged.len())
    }
}

/// What one file holds.
enum Contents<'a> {
    /// Values of a shape, as `<f4`.
    Values(&'a [u64], &'a [f32]),
    /// Row offsets, as `<i8`.
    Offsets(&'a [u64]),
}

fn write_file(file: File, contents: &Contents<'_>) -> std::io::Result<()> {
    let mut w = BufWriter::new(file);
    match contents {
        Contents::Values(shape, data) => npy::write(&mut w, shape, data)?,
        Contents::Offsets(offsets) => npy::write_offsets(&mut w, offsets)?,
    }
    w.flush()?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}
