@preconcurrency import Glibc
import PushOutbox

// A child process for the outbox crash tests: runs an OutboxFollower over STATE until it is
// killed (the test sends SIGKILL). Usage: pushspool-outbox-child STATE BASE_URL
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    _ = write(2, "usage: pushspool-outbox-child STATE BASE_URL\n", 45)
    exit(64)
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
options.pollInterval = .milliseconds(20)
do {
    try options.load(mindboxSecretKeyFile: arguments[1] + "/mindbox.key", infobipAppKeyFile: "")
    let follower = try OutboxFollower(options: options)
    follower.start()
    while true { sleep(60) }
} catch {
    let text = "pushspool-outbox-child: \(error)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}
