import Testing
@testable import PushPayload

func normalize(_ json: String, options: NormalizerOptions = NormalizerOptions()) -> NormalizeOutcome {
    Normalizer.normalize(Array(json.utf8), options: options)
}

/// The accepted notification, or a recorded failure naming the refusal.
func accept(_ json: String, options: NormalizerOptions = NormalizerOptions(), sourceLocation: SourceLocation = #_sourceLocation) throws -> PushNotification {
    switch normalize(json, options: options) {
    case .accepted(let n): return n
    case .refused(let r):
        Issue.record("refused \(r)", sourceLocation: sourceLocation)
        throw r
    }
}

/// The refusal, through ``Normalizer/classify(_:options:)`` (pushes and events alike).
func refusal(_ json: String, options: NormalizerOptions = NormalizerOptions()) -> PayloadRefusal? {
    if case .refused(let r) = Normalizer.classify(Array(json.utf8), options: options) { return r }
    return nil
}

/// The accepted event, or a recorded failure naming what came out instead.
func acceptEvent(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> PushEvent {
    switch Normalizer.classify(Array(json.utf8)) {
    case .event(let e): return e
    case let other:
        Issue.record("not an event: \(other)", sourceLocation: sourceLocation)
        throw EventExpected()
    }
}

struct EventExpected: Error {}

/// Options whose category table holds an app category with five actions.
var fiveActionOptions: NormalizerOptions {
    var options = NormalizerOptions()
    let actions = (1...5).map { CategoryAction(id: "a\($0)", title: "Action \($0)", options: [.foreground]) }
    options.categories = try! CategoryTable.builtIn.adding(NotificationCategory(id: "five", actions: actions))
    return options
}

/// The package root, found from this file's path (Tests/PushPayloadTests/Support.swift).
let repositoryRoot: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()
