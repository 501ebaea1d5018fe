//! `kuryr-controller`: see docs/controller.md.

use kuryr_controller::Args;

// Not glibc malloc: each of its arenas keeps what was freed in it (1,000 pods: 154 MiB RSS, 93 MiB with
// MALLOC_ARENA_MAX=2), and mallopt() is out of reach (unsafe code is forbidden here). mimalloc is declared
// in safe code and builds from one C file (jemalloc's configure + make would add minutes to every clean
// build); with the slimmed caches it measured 94 MiB against glibc's 100 MiB at 2,000 pods. `no_thp`: its
// default madvise(MADV_HUGEPAGE) made whole 2 MiB pages resident for partly used memory (+50 MiB there).
#[cfg(not(feature = "dhat-heap"))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Heap profiling (docs/controller.md#memory): every allocation with its call stack, written at exit to
/// `dhat-heap-<pid>.json` in the working directory (the peak and what was still held at exit).
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    #[cfg(feature = "dhat-heap")]
    let _profiler = dhat::Profiler::builder()
        .file_name(format!("dhat-heap-{}.json", std::process::id()))
        .build();
    Args::parse_and_run().await
}
