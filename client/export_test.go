package client

// WatcherBuffer is the frames a watcher holds before it ends as too slow.
const WatcherBuffer = watcherBuffer
