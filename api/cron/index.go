// Package handler is the Vercel function Vercel Cron calls (/api/cron) to
// run the sweeper; it requires the CRON_SECRET bearer token.
package handler

import (
	"net/http"

	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
)

// Handler runs one sweep.
func Handler(w http.ResponseWriter, r *http.Request) { vercel.For(apps.All()...).Cron(w, r) }
