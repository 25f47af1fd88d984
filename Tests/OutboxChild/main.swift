@preconcurrency import Glibc
import PushFollow
import PushJournal
import PushOutbox
import PushSystem

// A child process for the outbox crash tests: runs an OutboxFollower over STATE until it is
// killed (the test sends SIGKILL). Usage: pushspool-outbox-child STATE BASE_URL [RENAMES]
// The Infobip key is loaded when STATE/infobip.key exists. With RENAMES, every rename(2)
// after the first RENAMES fails with EIO: the follower writes exactly that many pending files
// and then can never advance its cursor, so a SIGKILL at any later moment lands in the state a
// crash between writing pending files and moving the cursor leaves.
let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4, arguments.count == 3 || Int(arguments[3]) != nil else {
    let usage = "usage: pushspool-outbox-child STATE BASE_URL [RENAMES]\n"
    _ = usage.withCString { write(2, $0, strlen($0)) }
    exit(64)
}
if arguments.count == 4, let renames = Int(arguments[3]) {
    FaultInjector.shared.arm(call: "renameat", errno: EIO, skip: renames)
}
var options = OutboxOptions(stateDirectory: arguments[1])
options.mindboxURL = arguments[2]
options.mindboxEndpointId = "app-ios"
options.infobipURL = arguments[2]
options.allowHTTP = true
options.allowNetworks = ["127.0.0.0/8"]
options.retryBase = .milliseconds(10)
options.retryCeiling = .milliseconds(40)
options.requestTimeout = .seconds(30)
do {
    let infobipKey = arguments[1] + "/infobip.key"
    try options.load(mindboxSecretKeyFile: arguments[1] + "/mindbox.key",
                     infobipAppKeyFile: access(infobipKey, F_OK) == 0 ? infobipKey : "")
    let follower = try OutboxFollower(options: options)
    // The journal was written before this process started: the runner maps it at once.
    let runner = FollowerRunner(follower, commits: CommitFeed(), niceness: 0)
    try runner.start()
    // why: this process exists to be killed mid-delivery; it does nothing else until then.
    while true { sleep(60) }
} catch {
    let text = "pushspool-outbox-child: \(error)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}
