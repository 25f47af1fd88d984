import PushFetchClient
import PushMedia

// Here rather than beside the protocol: PushFetchClient is linked into pushspoold, and naming
// MediaFetcher there would pull libcurl's transfers and libvips into the daemon.
extension MediaFetcher: MediaSource {}
