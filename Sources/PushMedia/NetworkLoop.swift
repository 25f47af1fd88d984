@preconcurrency import Glibc
internal import CCurl
import PushSystem
import PushMediaCore
import PushMediaURL

/// The network thread: drives every transfer through one curl multi handle, schedules
/// retries and hands finished bodies to the finishing threads.
///
/// `@unchecked Sendable`: handed to the network thread at start and used only there.
final class NetworkLoop: @unchecked Sendable {
    private let core: FetcherCore
    private let options: MediaOptions
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var ready: [Job] = []
    private var delayed: [Job] = []
    private var random = SystemRandomNumberGenerator()

    init(core: FetcherCore) {
        self.core = core
        options = core.options
    }

    func run() {
        let multi = core.multi.pointer
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, min(options.maxConcurrent, Int(Int32.max) / 2) * 2)
        while true {
            let (closed, urls) = core.state.withLock { state in
                defer { state.submissions.removeAll(keepingCapacity: true) }
                return (state.closed, state.submissions)
            }
            if closed {
                cancelEverything(pending: urls)
                break
            }
            let now = Posix.monotonicNanos()
            for url in urls {
                ready.append(Job(url: url, startedNanos: now, deadlineNanos: Bounded.deadline(now, plus: options.payloadDeadline.clampedUInt64Nanoseconds)))
            }
            startDueJobs()
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectFinished()
            startDueJobs()
            publishCounts()
            // Sleeps until a socket is ready, curl's next timer, the next retry or a
            // curl_multi_wakeup from `submit`/`shutdown`; an idle fetcher does not wake.
            _ = curl_multi_poll(multi, nil, 0, pollTimeoutMillis(), nil)
        }
        // The multi handle itself lives until FetcherCore's deinit: late shutdown() calls may
        // still wake it.
    }

    /// Until the sooner of curl's next timer (`curl_multi_timeout`) and the next retry; with
    /// neither, as long as `curl_multi_poll` allows (new work ends it with curl_multi_wakeup).
    private func pollTimeoutMillis() -> Int32 {
        if !ready.isEmpty && active.count < options.maxConcurrent { return 0 }
        var timeout = Int32.max
        var curlTimeout = -1
        if curl_multi_timeout(core.multi.pointer, &curlTimeout) == CURLM_OK, curlTimeout >= 0 {
            timeout = Int32(clamping: curlTimeout)
        }
        let now = Posix.monotonicNanos()
        if active.count < options.maxConcurrent, let next = delayed.map(\.notBeforeNanos).min() {
            // Rounded up, so the wake-up finds the retry due.
            timeout = min(timeout, next <= now ? 0 : Int32(clamping: (next - now + 999_999) / 1_000_000))
        }
        return timeout
    }

    private func publishCounts() {
        let inFlight = active.count
        let queued = ready.count + delayed.count
        core.state.withLock { state in
            state.stats.inFlight = inFlight
            state.stats.queued = queued + state.submissions.count
        }
    }

    private func startDueJobs() {
        let now = Posix.monotonicNanos()
        if !delayed.isEmpty {
            let due = delayed.filter { $0.notBeforeNanos <= now }
            if !due.isEmpty {
                delayed.removeAll { $0.notBeforeNanos <= now }
                // Retries go first: their payloads have waited longest.
                ready.insert(contentsOf: due, at: 0)
            }
        }
        while active.count < options.maxConcurrent, !ready.isEmpty {
            start(ready.removeFirst())
        }
    }

    private func start(_ job: Job) {
        if job.attemptsMade == 0, let failure = validate(job.url) {
            finishFailed(job, failure)
            return
        }
        let now = Posix.monotonicNanos()
        guard job.deadlineNanos > now + 50_000_000 else {
            finishFailed(job, job.lastFailure ?? MediaFailure(.timeout, "payload deadline (\(options.payloadDeadline) s) passed before the download could start"))
            return
        }
        job.attemptsMade += 1
        let tempPath = core.newTempPath()
        let fd: Int32
        do {
            fd = try Posix.open(tempPath, O_WRONLY | O_CREAT | O_EXCL, mode: 0o640)
        } catch {
            finishFailed(job, MediaFailure(.io, "cannot create \(tempPath): \(error)", transient: true))
            return
        }
        let transfer: Transfer
        do throws(MediaFailure) {
            transfer = try Transfer(job: job, options: options, policy: core.policy, tempPath: tempPath, fd: fd)
        } catch {
            // Transfer.init failed before taking the fd; it is still ours to close.
            Posix.close(fd)
            try? Posix.unlinkat(AT_FDCWD, tempPath)
            finishFailed(job, error)
            return
        }
        do throws(MediaFailure) {
            // At most maxSpanNanos / 1e6 (about 3e12): fits an Int.
            let remainingMillis = Int((job.deadlineNanos - now) / 1_000_000)
            try transfer.configure(timeoutMillis: min(Bounded.millis(options.transferDeadline), remainingMillis))
            let added = curl_multi_add_handle(core.multi.pointer, transfer.easy)
            guard added == CURLM_OK else {
                throw MediaFailure(.io, "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(added)))")
            }
            active[transfer.easy] = transfer
        } catch {
            transfer.release()
            discard(transfer)
            finishFailed(job, error)
        }
    }

    /// Checks scheme and host before anything touches the network.
    private func validate(_ url: String) -> MediaFailure? {
        let parts: MediaURL
        switch MediaURL.parse(url) {
        case .success(let parsed): parts = parsed
        case .failure(let failure): return failure
        }
        switch parts.scheme {
        case "https": break
        case "http" where options.allowHTTP: break
        case "http":
            return MediaFailure(.insecureScheme, "http:// media is not fetched; use https:// or set AllowHTTP=yes")
        default:
            return MediaFailure(.invalidURL, "scheme \"\(parts.scheme)\" is not supported; media URLs must be https://")
        }
        // RFC 6761 §6.4: names under .invalid never resolve; answering here keeps them off the resolver.
        if parts.host == "invalid" || parts.host.hasSuffix(".invalid") {
            return MediaFailure(.dnsFailed, "host \(parts.host) cannot be resolved (.invalid is reserved by RFC 6761); check the media URL")
        }
        return nil
    }

    private func collectFinished() {
        var easy: UnsafeMutableRawPointer?
        var result = CURLE_OK
        while ccurl_multi_next_done(core.multi.pointer, &easy, &result) == 1 {
            guard let easy, let transfer = active.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(core.multi.pointer, easy)
            transfer.release()
            conclude(transfer, result)
        }
    }

    private func conclude(_ transfer: Transfer, _ result: CURLcode) {
        let job = transfer.job
        var failure = transfer.abort
        if failure == nil && result != CURLE_OK { failure = map(result, transfer) }
        if failure == nil { failure = transfer.statusFailure(transfer.responseCode) }
        if failure == nil && transfer.sniffed == nil {
            failure = transfer.prefix.isEmpty
                ? MediaFailure(.unsupportedType, "the server sent an empty body")
                : transfer.checkType()
        }
        if let failure {
            discard(transfer)
            retryOrFail(job, failure, retryAfter: transfer.retryAfterSeconds)
            return
        }
        let body = FinishedBody(
            url: job.url, tempPath: transfer.tempPath, fd: transfer.fd, sha256: transfer.hasher.finalizeHex(),
            type: transfer.sniffed!, bytes: transfer.received, attempts: job.attemptsMade, startedNanos: job.startedNanos
        )
        transfer.fd = -1
        core.finish(body)
    }

    /// Closes and removes the partial file of a failed attempt.
    private func discard(_ transfer: Transfer) {
        if transfer.fd >= 0 {
            Posix.close(transfer.fd)
            transfer.fd = -1
        }
        try? Posix.unlinkat(AT_FDCWD, transfer.tempPath)
    }

    private func retryOrFail(_ job: Job, _ failure: MediaFailure, retryAfter: Double?) {
        job.lastFailure = failure
        guard failure.isTransient, job.attemptsMade < options.attempts else {
            finishFailed(job, failure)
            return
        }
        let delay: Double
        if failure.code == .httpStatus, let retryAfter {
            delay = min(retryAfter, options.maxRetryAfter)
        } else {
            // Exponential backoff with "equal jitter": half fixed, half random. The base is
            // capped (a day) so a huge RetryBaseDelay= cannot make the random range infinite.
            let base = min(options.retryBaseDelay * Double(1 << min(max(job.attemptsMade - 1, 0), 16)), 86_400)
            delay = base > 0 ? base / 2 + Double.random(in: 0...(base / 2), using: &random) : 0
        }
        let now = Posix.monotonicNanos()
        let notBefore = Bounded.deadline(now, plus: Bounded.nanos(seconds: delay))
        guard Bounded.deadline(notBefore, plus: 100_000_000) < job.deadlineNanos else {
            finishFailed(job, failure)
            return
        }
        job.notBeforeNanos = notBefore
        delayed.append(job)
        core.state.withLock { $0.stats.retries += 1 }
    }

    private func finishFailed(_ job: Job, _ failure: MediaFailure) {
        var failure = failure
        if job.attemptsMade > 1 { failure.message += " (after \(job.attemptsMade) attempts)" }
        let outcome = MediaOutcome(
            url: job.url, status: .failed, attempts: job.attemptsMade,
            durationMillis: Int64((Posix.monotonicNanos() - job.startedNanos) / 1_000_000), error: failure
        )
        core.complete(outcome)
    }

    private func map(_ result: CURLcode, _ transfer: Transfer) -> MediaFailure {
        let code = Int32(result.rawValue)
        let detail = transfer.curlMessage.isEmpty ? String(cString: curl_easy_strerror(result)) : transfer.curlMessage
        func failure(_ kind: MediaFailure.Code, _ message: String, transient: Bool) -> MediaFailure {
            MediaFailure(kind, message, transient: transient, curlCode: code, httpStatus: transfer.statusFromHeaders == 0 ? nil : transfer.statusFromHeaders)
        }
        switch result {
        case CURLE_OPERATION_TIMEDOUT:
            return failure(.timeout, "\(detail); the server is too slow or does not answer (limits: ConnectTimeout=, TransferDeadline=, LowSpeedLimit=)", transient: true)
        case CURLE_COULDNT_CONNECT:
            if let refused = transfer.refusedAddress {
                return failure(.ssrfRefused, refused, transient: false)
            }
            return failure(.connectFailed, "\(detail); the server is down or unreachable", transient: true)
        case CURLE_COULDNT_RESOLVE_HOST:
            return failure(.dnsFailed, "\(detail); check the host name in the media URL", transient: true)
        case CURLE_TOO_MANY_REDIRECTS:
            return failure(.tooManyRedirects, "more than \(options.maxRedirects) redirects (a loop?); \(detail)", transient: false)
        case CURLE_FILESIZE_EXCEEDED:
            return failure(.tooLarge, "announced size exceeds the \(options.maxBytes)-byte limit (MaxBytes=)", transient: false)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return failure(.insecureScheme, "\(detail); redirects must stay on https\(options.allowHTTP ? " or http" : " (AllowHTTP=no)")", transient: false)
        case CURLE_URL_MALFORMAT:
            return failure(.invalidURL, detail, transient: false)
        case CURLE_SSL_CONNECT_ERROR:
            return failure(.tls, "\(detail); TLS handshake failed", transient: true)
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
             CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return failure(.tls, "\(detail); the server's certificate is not trusted", transient: false)
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM,
             CURLE_WEIRD_SERVER_REPLY:
            return failure(.network, "\(detail); the connection broke", transient: true)
        default:
            return failure(.network, detail, transient: false)
        }
    }

    private func cancelEverything(pending: [String]) {
        let now = Posix.monotonicNanos()
        var jobs: [Job] = ready + delayed
        for (easy, transfer) in active {
            curl_multi_remove_handle(core.multi.pointer, easy)
            transfer.release()
            discard(transfer)
            jobs.append(transfer.job)
        }
        active.removeAll()
        ready.removeAll()
        delayed.removeAll()
        for job in jobs {
            core.complete(MediaOutcome(url: job.url, status: .failed, attempts: job.attemptsMade,
                                       durationMillis: Int64((now - job.startedNanos) / 1_000_000), error: FetcherCore.cancelledFailure))
        }
        for url in pending {
            core.complete(MediaOutcome(url: url, status: .failed, error: FetcherCore.cancelledFailure))
        }
    }
}
