import Foundation
import PushInbox
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Issue 37, rule 3: `POST /v1/events/nc-open` takes the app's platform in
/// `X-Pushspool-Platform` and journals it as the event's `platform` (which picks the Mindbox
/// endpoint of NCOpen); any other value is refused before anything is written.
@Suite struct NcOpenPlatformTests {
    static func post(_ api: InboxAPI, platform: String?) -> Int {
        var headers = ["authorization": "Bearer " + TokenAuth(secret: Array("a-secret-of-some-length".utf8)).token(user: "alice"),
                       "x-pushspool-user": "alice"]
        if let platform { headers["x-pushspool-platform"] = platform }
        return api.handle(HTTPRequest(method: "POST", path: "/v1/events/nc-open", headers: headers)).status
    }

    @Test func thePlatformHeaderReachesTheEventAndABadOneIsRefused() async throws {
        let setup = try EventHubTests.Setup()
        _ = try await setup.notification("hello")
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let spool = SpoolLayout(root: setup.temp.appending("spool"))
        try spool.create()
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal))
        #expect(Self.post(api, platform: "windows") == 400)
        #expect(Self.post(api, platform: "") == 400)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.incoming).isEmpty)
        #expect(Self.post(api, platform: "android") == 202)
        #expect(Self.post(api, platform: nil) == 202)
        var platforms: [EventPlatform?] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: spool.incoming) {
            guard case .event(let event) = Normalizer.classify(try Posix.readFile(spool.incoming + "/" + name)) else {
                Issue.record("not an event: \(name)")
                continue
            }
            #expect(event.type == .opened)
            platforms.append(event.platform)
        }
        #expect(platforms.sorted { ($0?.rawValue ?? "") < ($1?.rawValue ?? "") } == [nil, .android])
    }
}
