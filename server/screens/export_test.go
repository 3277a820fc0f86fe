package screens

// Names the external tests reach inside the package.

var ScreenFor = (*Part).screenFor
var BuildScreenView = (*Part).buildScreenView
var EndScreen = (*Part).endScreen
var NewScreen = (*Part).newScreen
var RemoveScreen = (*Part).removeScreen
var AllowedOptions = (*Part).screenOptions
var VisibleScreens = (*Part).visibleScreens
var WriteScreen = (*Part).writeScreen

// IdemInProgress is idemInProgress.
var IdemInProgress = idemInProgress

// IdemNew is idemNew.
var IdemNew = idemNew

// IdemReplay is idemReplay.
var IdemReplay = idemReplay

// KeptUpdates is keptUpdates.
const KeptUpdates = keptUpdates

// MaxScreenChars is maxScreenChars.
const MaxScreenChars = maxScreenChars

// NewIdemCache is newIdemCache.
var NewIdemCache = newIdemCache

// ScreenSummary is screenSummary.
type ScreenSummary = screenSummary

// MetaButton is metaButton.
const MetaButton = metaButton

// MetaIdempotencyKey is metaIdempotencyKey.
const MetaIdempotencyKey = metaIdempotencyKey

// MetaScreen is metaScreen.
const MetaScreen = metaScreen

// MarkedFields is markedFields.
var MarkedFields = markedFields

// ID returns the screen's id.
func (sc *liveScreen) ID() string { return sc.id }

// UpdatesAfter is updatesAfter.
func (sc *liveScreen) UpdatesAfter(after int64) ([]liveUpdate, <-chan struct{}, bool) {
	return sc.updatesAfter(after)
}

// Seq returns the sequence number of the screen's last update.
func (sc *liveScreen) Seq() int64 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.seq
}

// LiveUpdate is liveUpdate.
type LiveUpdate = liveUpdate
