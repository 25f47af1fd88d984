import Foundation
import Testing
@testable import PushMedia
import PushMediaCore
import PushSystem
import TestSupport

/// https against `openssl s_server -WWW` on 127.0.0.1 with a certificate made for the test.
@Suite struct TLSTests {
    @Test func httpsWithTrustedCertificateStores() async throws {
        let dir = TempDir()
        let server = try TLSFileServer(dir, files: ["a.jpg": ImageFixtures.jpeg])
        var options = testOptions(dir)
        options.allowHTTP = false
        options.caFile = server.certificate
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("a.jpg"))
        #expect(outcome.status == .stored, "\(outcome.encodeJSON())")
        #expect(outcome.sha256 == SHA256.hex(of: ImageFixtures.jpeg))
    }

    @Test func untrustedCertificateFailsWithoutRetry() async throws {
        let dir = TempDir()
        let server = try TLSFileServer(dir, files: ["a.jpg": ImageFixtures.jpeg])
        var options = testOptions(dir)
        options.allowHTTP = false
        // A valid certificate, but not the one the server presents.
        options.caFile = try TLSFileServer.makeCertificate(dir, name: "other").0
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("a.jpg"))
        #expect(outcome.error?.code == .tls, "\(outcome.encodeJSON())")
        #expect(outcome.error?.curlCode == 60) // CURLE_PEER_FAILED_VERIFICATION
        #expect(outcome.attempts == 1)
    }
}
