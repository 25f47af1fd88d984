import PushMediaCore

/// Where the daemon's pipeline gets media from: a `FetchSupervisor` driving the separate
/// `pushspool-fetch` process, or the in-process `MediaFetcher` (tests, benchmarks; its
/// conformance lives in PushFetchServer so that pushspoold does not link libvips).
///
/// `Sendable`: both implementations are called from the processing queue and complete on
/// threads of their own.
package protocol MediaSource: Sendable {
    /// Fetches `url`; `completion` runs exactly once, on a thread of the source, and must be short.
    func fetch(url: String, completion: @escaping @Sendable (MediaOutcome) -> Void)
    /// Stops; waiting fetches complete as `cancelled` (their payloads are kept for the next start).
    func shutdown()
    /// Counters for STATUS=, metrics and status.json.
    var stats: MediaStats { get }
}
