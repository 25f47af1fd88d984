import PushMediaCore

extension FetchResult {
    /// The fetcher's side: what to report for a finished download.
    package init(_ outcome: MediaOutcome) {
        switch outcome.status {
        case .stored:
            guard let sha256 = outcome.sha256, let mime = outcome.contentType,
                  let type = MediaType.allCases.first(where: { $0.mimeType == mime }) else {
                self = .failed(FetchFailure(code: .io, message: "stored outcome without content address or type", transient: true,
                                            curlCode: nil, httpStatus: nil, attempts: Int64(outcome.attempts),
                                            durationMillis: outcome.durationMillis))
                return
            }
            let thumbnail = outcome.thumbnail.map {
                StoredThumbnail(isPNG: $0.path.hasSuffix(".png"), width: Int64($0.width), height: Int64($0.height), bytes: $0.bytes)
            }
            self = .stored(StoredMedia(sha256: sha256, type: type, bytes: outcome.bytes ?? 0, attempts: Int64(outcome.attempts),
                                       durationMillis: max(0, outcome.durationMillis), decodable: outcome.decodable,
                                       thumbnail: thumbnail, thumbnailError: outcome.thumbnailError, reused: outcome.reused))
        case .failed:
            let error = outcome.error ?? MediaFailure(.io, "failed without a reason")
            self = .failed(FetchFailure(code: error.code, message: error.message, transient: error.isTransient,
                                        curlCode: error.curlCode, httpStatus: error.httpStatus.map { Int64($0) },
                                        attempts: Int64(outcome.attempts), durationMillis: max(0, outcome.durationMillis)))
        case .skipped:
            self = .skipped(reason: outcome.skipReason ?? "skipped")
        }
    }

    /// The daemon's side: the outcome a record carries. Paths are built here from the daemon's
    /// own `storeDirectory` and the content address, never taken from the fetcher.
    package func outcome(url: String, storeDirectory: String, thumbnailMaxEdge: Int) -> MediaOutcome {
        switch self {
        case .stored(let stored):
            var outcome = MediaOutcome(url: url, status: .stored, attempts: Int(clamping: stored.attempts),
                                       durationMillis: stored.durationMillis)
            outcome.path = storeDirectory + "/" + MediaStore.relativePath(sha256: stored.sha256, fileExtension: stored.type.fileExtension)
            outcome.sha256 = stored.sha256
            outcome.contentType = stored.type.mimeType
            outcome.bytes = stored.bytes
            outcome.decodable = stored.decodable
            outcome.thumbnail = stored.thumbnail.map {
                MediaThumbnail(path: storeDirectory + "/" + MediaStore.thumbnailRelativePath(
                                   sha256: stored.sha256, maxEdge: thumbnailMaxEdge, fileExtension: $0.isPNG ? "png" : "jpg"),
                               width: Int(clamping: $0.width), height: Int(clamping: $0.height), bytes: $0.bytes)
            }
            outcome.thumbnailError = stored.thumbnailError
            outcome.reused = stored.reused
            return outcome
        case .failed(let failure):
            let error = MediaFailure(failure.code, failure.message, transient: failure.transient, curlCode: failure.curlCode,
                                     httpStatus: failure.httpStatus.map { Int(clamping: $0) })
            return MediaOutcome(url: url, status: .failed, attempts: Int(clamping: failure.attempts),
                                durationMillis: failure.durationMillis, error: error)
        case .skipped(let reason):
            return MediaOutcome.skipped(url: url, reason: reason)
        }
    }
}
