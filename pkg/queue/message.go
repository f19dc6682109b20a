package queue

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxTaskIDLen bounds the task id a pushed message may carry. Task ids are
// 22 characters (driver.NewID); the bound only keeps garbage out.
const MaxTaskIDLen = 256

// Message is the body of a message that a push queue (Amazon SQS, Upstash
// QStash) carries to a worker: only the task id, as JSON, so that the body
// can grow fields without breaking older workers.
type Message struct {
	TaskID string `json:"taskId"`
}

// EncodeMessage returns the body of the message for taskID.
func EncodeMessage(taskID string) []byte {
	b, _ := json.Marshal(Message{TaskID: taskID}) // a struct of one string never fails
	return b
}

// DecodeMessage returns the task id carried by body, or an error when body is
// not a message of this package.
func DecodeMessage(body []byte) (string, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("queue: undecodable message: %w", err)
	}
	if err := CheckTaskID(m.TaskID); err != nil {
		return "", err
	}
	return m.TaskID, nil
}

// CheckTaskID rejects an id that is empty, too long or has characters
// outside printable ASCII.
func CheckTaskID(id string) error {
	if id == "" {
		return errors.New("queue: message has no taskId")
	}
	if len(id) > MaxTaskIDLen {
		return fmt.Errorf("queue: taskId of %d bytes exceeds %d", len(id), MaxTaskIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("queue: taskId has a byte 0x%02x outside printable ASCII", id[i])
		}
	}
	return nil
}
