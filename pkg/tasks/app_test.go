package tasks_test

import (
	"fmt"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// An App is declared once, next to its tools; every platform adapter
// serves it. Its name and version are the server's serverInfo.
func ExampleApp() {
	app := &tasks.App{Name: "transcode", Version: "1.2.0", Register: func(s *tasks.Server) {
		// tasks.AddTool(s, ...) for each task tool
	}}
	info := app.Implementation()
	fmt.Println(info.Name, info.Version)
	fmt.Println((&tasks.App{}).Implementation().Name)
	// Output:
	// transcode 1.2.0
	// mcptasks
}
