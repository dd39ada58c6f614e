//! This process's resident memory over time: the node runs in it, so its RSS is the
//! node's (and the clients', which hold little).

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// How often the sampler reads the RSS.
const EVERY: Duration = Duration::from_secs(1);

/// `VmRSS` of `/proc/self/status`, in MiB.
pub(crate) fn rss_mib() -> anyhow::Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("/proc/self/status has no VmRSS")?;
    Ok(kib / 1024.0)
}

/// A thread that reads the RSS every second until stopped.
pub(crate) struct Sampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<(Duration, f64)>>,
    pub started: Instant,
}

impl Sampler {
    pub(crate) fn start() -> anyhow::Result<Sampler> {
        rss_mib()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        // Ends when told to or when the suite drops its end of the channel; a failed
        // read (none after the first succeeded) ends the series early.
        let thread = std::thread::Builder::new()
            .name("soak-rss".into())
            .spawn(move || {
                let mut series = Vec::new();
                loop {
                    let Ok(mib) = rss_mib() else { return series };
                    series.push((started.elapsed(), mib));
                    if !matches!(stopped.recv_timeout(EVERY), Err(mpsc::RecvTimeoutError::Timeout)) {
                        return series;
                    }
                }
            })
            .context("spawning the RSS sampler")?;
        Ok(Sampler { stop, thread, started })
    }

    /// The samples: time since the start, MiB.
    pub(crate) fn stop(self) -> Vec<(Duration, f64)> {
        let _ = self.stop.send(());
        self.thread.join().expect("the sampler does not panic")
    }
}
