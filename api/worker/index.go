// Package handler is the Vercel function QStash pushes task messages to
// (/api/worker): it verifies the Upstash-Signature and advances the task by
// one step.
package handler

import (
	"net/http"

	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
)

// Handler handles one QStash delivery.
func Handler(w http.ResponseWriter, r *http.Request) { vercel.For(apps.All()...).Worker(w, r) }
