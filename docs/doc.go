// Package docs holds the project's documentation; its test keeps the
// references complete.
package docs
