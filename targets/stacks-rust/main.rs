// Threads with known stacks in Rust (issue 35): the C target's shapes, with std's own types.
//
//   waiter   main::level1 -> level2 -> level3 -> Mutex::lock (main holds the lock for good)
//   recurse  main::recurse(10) -> ... -> recurse(0) -> main::bottom -> thread::sleep
//   reader   main::read_input -> read (a pipe nobody writes)
//   spinner  main::spin -> main::hot / main::cold (3:1)
//
// Each thread is named; "ready pid=N" once every thread is where it stays.
use std::fs::File;
use std::io::Read;
use std::os::unix::io::FromRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

static HELD: Mutex<u64> = Mutex::new(0);
static READY: AtomicUsize = AtomicUsize::new(0);
static HOT: AtomicU64 = AtomicU64::new(0);
static COLD: AtomicU64 = AtomicU64::new(0);
static SINK: AtomicU64 = AtomicU64::new(0);

extern "C" {
    fn pipe(fds: *mut i32) -> i32;
}

#[inline(never)]
fn level3() {
    READY.fetch_add(1, Ordering::SeqCst);
    let guard = HELD.lock().unwrap();
    SINK.fetch_add(*guard, Ordering::Relaxed);
}
#[inline(never)]
fn level2() { level3(); SINK.fetch_add(1, Ordering::Relaxed); }
#[inline(never)]
fn level1() { level2(); SINK.fetch_add(1, Ordering::Relaxed); }

#[inline(never)]
fn bottom() {
    READY.fetch_add(1, Ordering::SeqCst);
    loop {
        thread::sleep(Duration::from_secs(3600));
    }
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == 0 {
        bottom();
        return 0;
    }
    let r = recurse(n - 1);
    r + n
}

#[inline(never)]
fn read_input(mut input: File) {
    READY.fetch_add(1, Ordering::SeqCst);
    let mut byte = [0u8; 1];
    while input.read(&mut byte).unwrap_or(0) > 0 {}
}

#[inline(never)]
fn hot() {
    for i in 0..3000u64 {
        SINK.fetch_add(i, Ordering::Relaxed);
    }
    HOT.fetch_add(1, Ordering::Relaxed);
}
#[inline(never)]
fn cold() {
    for i in 0..1000u64 {
        SINK.fetch_add(i, Ordering::Relaxed);
    }
    COLD.fetch_add(1, Ordering::Relaxed);
}
#[inline(never)]
fn spin() {
    READY.fetch_add(1, Ordering::SeqCst);
    loop {
        hot();
        cold();
    }
}

fn main() {
    let mut fds = [0i32; 2];
    if unsafe { pipe(fds.as_mut_ptr()) } != 0 {
        std::process::exit(1);
    }
    let input = unsafe { File::from_raw_fd(fds[0]) };
    let _held = HELD.lock().unwrap();
    let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| thread::Builder::new().name(name.into()).spawn(body).unwrap();
    let _w = spawn("waiter", Box::new(level1));
    let _r = spawn("recurse", Box::new(|| { SINK.fetch_add(recurse(10), Ordering::Relaxed); }));
    let _i = spawn("reader", Box::new(move || read_input(input)));
    let _s = spawn("spinner", Box::new(spin));
    while READY.load(Ordering::SeqCst) < 4 {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
    println!("ready pid={}", std::process::id());
    loop {
        thread::sleep(Duration::from_secs(1));
        println!("hot={} cold={}", HOT.load(Ordering::Relaxed), COLD.load(Ordering::Relaxed));
    }
}
