package server

import (
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// chatConstraint builds the decoding constraint a chat request asks for.
func (s *Server) chatConstraint(rf *openai.ResponseFormat, choice openai.ToolChoice, tools []openai.Tool) (sample.Constraint, error) {
	if rf != nil {
		switch rf.Type {
		case "text":
		case "json_object", "json_schema":
			return nil, &apiError{status: 501, typ: "invalid_request_error", param: "response_format", msg: "response_format " + rf.Type + ": not implemented yet"}
		default:
			return nil, invalid("response_format.type", "unknown response_format type %q (text, json_object or json_schema)", rf.Type)
		}
	}
	if choice.Mode == "required" || choice.Mode == "function" {
		return nil, &apiError{status: 501, typ: "invalid_request_error", param: "tool_choice", msg: "tool_choice " + choice.Mode + ": not implemented yet"}
	}
	return nil, nil
}
