//! `run --out DIR`: results written as `DIR/NAME.npy`, all or nothing.
//!
//! A result's files are a set: `NAME.npy`, and for a ragged result one
//! offsets file per ragged axis beside it (`NAME.offsets.npy` for the
//! outermost, then `NAME.offsets.1.npy`, `NAME.offsets.2.npy`, …). [`OutDir::prepare`] checks the directory
//! before the run: it exists or can be created, is a directory, a file can
//! be created in it, and every result's file name fits. [`OutDir::write`]
//! then replaces every result's set as a whole, all results or none:
//!
//! 1. It checks every path of every set before it writes anything: none
//!    may be a directory (which no rename replaces), and the error names
//!    the first that is. An offsets file of a level the result no longer
//!    has (a dense result's `NAME.offsets.npy`, or `NAME.offsets.2.npy` of
//!    a result with two ragged axes now), left by an earlier run, is part
//!    of its set: it no longer applies and is removed, in the same step.
//! 2. It writes every file to a temporary file in the directory (created
//!    new, so it never follows a link) and syncs it.
//! 3. Only when every one is complete, it moves each existing file of a
//!    set aside to a hidden backup name and renames the new one onto it;
//!    a stale companion is moved aside too. A rename replaces a symbolic
//!    link, and never writes through it. When a rename fails, every step
//!    taken is undone in reverse (the new files removed, the backups
//!    renamed back), so the directory is as it was; only when all of them
//!    succeed are the backups removed.
//!
//! When anything fails, every temporary file is removed and no file in the
//! directory has changed.

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
    /// For a ragged result, each ragged axis's row offsets (outermost
    /// first: where each row starts, then the total): written beside the
    /// values as `NAME.offsets.npy`, `NAME.offsets.1.npy`, … (int64).
    /// Empty for a dense result.
    pub offsets: Vec<&'a [u64]>,
}

/// The file of a ragged result's offsets at `level` (0: the outermost).
pub fn offsets_file(name: &str, level: usize) -> String {
    match level {
        0 => format!("{name}.offsets.npy"),
        k => format!("{name}.offsets.{k}.npy"),
    }
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
            // Room for a ragged result's `NAME.offsets.99.npy` too.
            let file = format!("{name}.npy");
            if file.len() + ".offsets.99".len() > MAX_FILE_NAME {
                return Err(refused(
                    &dir.join(format!("{}....npy", &name[..16.min(name.len())])),
                    &format!(
                        "the file name of `{}...` is {} bytes long, more than the {MAX_FILE_NAME} a file system allows",
                        &name[..16.min(name.len())],
                        file.len() + ".offsets.99".len()
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

    /// For each result, one past the highest offsets level found in the
    /// directory (`NAME.offsets.npy` is level 0, `NAME.offsets.K.npy`
    /// level K): one listing of the directory, whatever the number of
    /// results.
    fn offsets_levels(&self, results: &[ResultFile<'_>]) -> Result<Vec<usize>, CliError> {
        let mut found: std::collections::HashMap<&str, usize> =
            results.iter().map(|r| (r.name, 0usize)).collect();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| write_error(&self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| write_error(&self.dir, e))?;
            let file = entry.file_name();
            let Some(file) = file.to_str() else { continue };
            let Some(stem) = file.strip_suffix(".npy") else {
                continue;
            };
            let (name, level) = match stem.rsplit_once(".offsets") {
                Some((name, "")) => (name, 0),
                Some((name, rest)) => match rest.strip_prefix('.').map(str::parse::<usize>) {
                    Some(Ok(k)) if k > 0 => (name, k),
                    _ => continue,
                },
                None => continue,
            };
            if let Some(n) = found.get_mut(name) {
                *n = (*n).max(level + 1);
            }
        }
        Ok(results.iter().map(|r| found[r.name]).collect())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes every result, all or nothing; returns how many files were
    /// written.
    pub fn write(&self, results: &[ResultFile<'_>]) -> Result<usize, CliError> {
        self.write_with(results, &mut |from, to| std::fs::rename(from, to))
    }

    /// [`OutDir::write`], with the renames that put files in place and
    /// move old ones aside done by `rename` (the tests make it fail).
    fn write_with(
        &self,
        results: &[ResultFile<'_>],
        rename: &mut dyn FnMut(&Path, &Path) -> std::io::Result<()>,
    ) -> Result<usize, CliError> {
        let mut files: Vec<(PathBuf, Contents<'_>)> = Vec::with_capacity(results.len());
        for r in results {
            files.push((
                self.dir.join(format!("{}.npy", r.name)),
                Contents::Values(&r.shape, r.data),
            ));
            for (level, offsets) in r.offsets.iter().enumerate() {
                files.push((
                    self.dir.join(offsets_file(r.name, level)),
                    Contents::Offsets(offsets),
                ));
            }
        }
        // 1. Every path of every set, before anything is written.
        for (dest, _) in &files {
            if is_directory(dest)? {
                return Err(refused(
                    dest,
                    "it is a directory, which a result file cannot replace; no file was written",
                ));
            }
        }
        let mut stale: Vec<PathBuf> = Vec::new();
        let mut companions: Vec<(PathBuf, &str, bool)> = Vec::new();
        let levels_found = self.offsets_levels(results)?;
        for (r, found) in results.iter().zip(levels_found) {
            for level in r.offsets.len()..found {
                let path = self.dir.join(offsets_file(r.name, level));
                companions.push((path, r.name, r.offsets.is_empty()));
            }
        }
        for (companion, name, dense) in companions {
            if files.iter().any(|(dest, _)| *dest == companion) {
                continue;
            }
            match std::fs::symlink_metadata(&companion) {
                Ok(m) if m.is_dir() => {
                    return Err(refused(
                        &companion,
                        &format!(
                            "it is a directory, where the row offsets of `{name}` from a run in which it {} would be removed; no file was written",
                            if dense { "was ragged (it is dense now)" } else { "had more ragged axes" }
                        ),
                    ))
                }
                Ok(_) => stale.push(companion),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(write_error(&companion, e)),
            }
        }
        // 2. Every file to a temporary file.
        let mut staged: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(files.len());
        let cleanup = |staged: &[(PathBuf, PathBuf)]| {
            for (tmp, _) in staged {
                let _ = std::fs::remove_file(tmp);
            }
        };
        for (i, (dest, contents)) in files.iter().enumerate() {
            let tmp = temporary(&self.dir, i);
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
                return Err(write_error(dest, e));
            }
        }
        // 3. The renames, each recorded so that it can be undone.
        let mut done: Vec<Step> = Vec::new();
        let mut backups = 0usize;
        let mut aside = |path: &Path,
                         done: &mut Vec<Step>,
                         rename: &mut dyn FnMut(&Path, &Path) -> std::io::Result<()>|
         -> std::io::Result<()> {
            match std::fs::symlink_metadata(path) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            }
            let backup = self
                .dir
                .join(format!(".shapec-{}-{backups}.npy.old", std::process::id()));
            backups += 1;
            rename(path, &backup)?;
            done.push(Step::Aside {
                original: path.to_path_buf(),
                backup,
            });
            Ok(())
        };
        let mut failed: Option<(PathBuf, std::io::Error)> = None;
        for (tmp, dest) in &staged {
            let placed = aside(dest, &mut done, rename).and_then(|()| rename(tmp, dest));
            if let Err(e) = placed {
                failed = Some((dest.clone(), e));
                break;
            }
            done.push(Step::Placed(dest.clone()));
        }
        if failed.is_none() {
            for companion in &stale {
                if let Err(e) = aside(companion, &mut done, rename) {
                    failed = Some((companion.clone(), e));
                    break;
                }
            }
        }
        if let Some((path, e)) = failed {
            let undone = undo(&done);
            cleanup(&staged);
            let e = match undone {
                Ok(()) => e,
                Err(left) => std::io::Error::new(
                    e.kind(),
                    format!("{e}; and undoing the files already replaced failed: {left}"),
                ),
            };
            return Err(write_error(&path, e));
        }
        for step in &done {
            if let Step::Aside { backup, .. } = step {
                let _ = std::fs::remove_file(backup);
            }
        }
        Ok(staged.len())
    }
}

/// A rename done while results are put in place.
enum Step {
    /// An existing file moved to a backup name.
    Aside { original: PathBuf, backup: PathBuf },
    /// A new file renamed onto this path.
    Placed(PathBuf),
}

/// Undoes `done` in reverse: removes each new file and renames each backup
/// back. Goes on past a failure; says what could not be undone.
fn undo(done: &[Step]) -> Result<(), String> {
    let mut left: Vec<String> = Vec::new();
    for step in done.iter().rev() {
        let undone = match step {
            Step::Placed(dest) => std::fs::remove_file(dest),
            Step::Aside { original, backup } => std::fs::rename(backup, original),
        };
        if let Err(e) = undone {
            left.push(match step {
                Step::Placed(dest) => format!("{} is the new file ({e})", dest.display()),
                Step::Aside { original, backup } => format!(
                    "the earlier {} is at {} ({e})",
                    original.display(),
                    backup.display()
                ),
            });
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(left.join("; "))
    }
}

/// Whether `path` is a directory (not a link to one); an error other than
/// its absence is a write error.
fn is_directory(path: &Path) -> Result<bool, CliError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(m.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(write_error(path, e)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("shapec-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Every entry's name and bytes (`None` for a directory).
    fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let bytes = (!path.is_dir()).then(|| std::fs::read(&path).unwrap());
                (name, bytes)
            })
            .collect()
    }

    /// `b` dense, `c` ragged, over a directory where `b` was ragged and
    /// `c` dense.
    fn setup(name: &str) -> PathBuf {
        let dir = scratch(name);
        for (file, text) in [
            ("b.npy", "old b"),
            ("b.offsets.npy", "old b offsets"),
            ("c.npy", "old c"),
            ("other.npy", "not a result"),
        ] {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    fn results<'a>(data: &'a [f32], offsets: &'a [u64]) -> Vec<ResultFile<'a>> {
        vec![
            ResultFile {
                name: "b",
                shape: vec![2],
                data: &data[..2],
                offsets: Vec::new(),
            },
            ResultFile {
                name: "c",
                shape: vec![3],
                data,
                offsets: vec![offsets],
            },
        ]
    }

    #[test]
    fn a_failed_rename_undoes_every_one_before_it() {
        let dir = setup("undo");
        let out = OutDir { dir: dir.clone() };
        let before = snapshot(&dir);
        let (data, offsets) = ([1.0, 2.0, 3.0], [0, 1, 3]);
        // Renames: b.npy aside, b.npy in, c.npy aside, c.npy in,
        // c.offsets.npy in, the stale b.offsets.npy aside: a failure at
        // each in turn leaves the directory as it was.
        for fail_at in 0..6 {
            let mut calls = 0;
            let e = out
                .write_with(&results(&data, &offsets), &mut |from, to| {
                    calls += 1;
                    if calls == fail_at + 1 {
                        Err(std::io::Error::other("injected"))
                    } else {
                        std::fs::rename(from, to)
                    }
                })
                .unwrap_err();
            assert!(e.to_string().contains("injected"), "{e}");
            assert_eq!(snapshot(&dir), before, "failing rename {fail_at}");
        }
        // Then all of them.
        assert_eq!(out.write(&results(&data, &offsets)).unwrap(), 3);
        let after = snapshot(&dir);
        let names: Vec<&str> = after.keys().map(String::as_str).collect();
        assert_eq!(names, ["b.npy", "c.npy", "c.offsets.npy", "other.npy"]);
        let b = npy::read(after["b.npy"].as_ref().unwrap()).unwrap();
        assert_eq!((b.shape, b.data), (vec![2], vec![1.0, 2.0]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_at_any_path_of_a_set_is_refused_before_anything_is_written() {
        let (data, offsets) = ([1.0, 2.0, 3.0], [0, 1, 3]);
        for (blocked, says) in [
            ("b.npy", "which a result file cannot replace"),
            ("c.offsets.npy", "which a result file cannot replace"),
            (
                "b.offsets.npy",
                "the row offsets of `b` from a run in which it was ragged",
            ),
        ] {
            let dir = setup("refused");
            let _ = std::fs::remove_file(dir.join(blocked));
            std::fs::create_dir(dir.join(blocked)).unwrap();
            let before = snapshot(&dir);
            let out = OutDir { dir: dir.clone() };
            let mut renames = 0;
            let e = out
                .write_with(&results(&data, &offsets), &mut |from, to| {
                    renames += 1;
                    std::fs::rename(from, to)
                })
                .unwrap_err();
            assert_eq!(renames, 0, "{blocked}");
            let message = e.to_string();
            assert!(
                message.starts_with(&format!(
                    "cannot write {}: it is a directory",
                    dir.join(blocked).display()
                )) && message.contains(says),
                "{message}"
            );
            assert_eq!(snapshot(&dir), before);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
