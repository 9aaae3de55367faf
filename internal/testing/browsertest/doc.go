// Package browsertest starts headless Chromium (Debian's chromium, through
// chromedp) for the browser tests of the console and towerd. Without
// chromium a test skips, except under CI=true, where it fails: .ci/run
// installs it.
//
//	ctx := browsertest.New(t)
//	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login")))
package browsertest
