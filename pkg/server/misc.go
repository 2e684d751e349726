package server

import (
	"net/http"
	"runtime"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

func (s *Server) modelCard() openai.Model {
	info := s.eng.Info()
	return openai.Model{ID: s.model, Object: "model", Created: s.created, OwnedBy: "ellm", Root: info.ModelName,
		MaxModelLen: info.SequenceLength, Synthetic: info.Synthetic}
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, openai.ModelList{Object: "list", Data: []openai.Model{s.modelCard()}})
	return nil
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkModel(r.PathValue("model")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.modelCard())
	return nil
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.opts.Version, "go": runtime.Version(), "kernels": s.eng.Info().KernelPath})
	return nil
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) error {
	var req openai.TokenizeRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	var text string
	switch {
	case req.Prompt != nil && req.Messages != nil:
		return invalid("prompt", "give either prompt or messages, not both")
	case req.Prompt != nil:
		text = *req.Prompt
	case req.Messages != nil:
		msgs, err := openai.NormalizeMessages(req.Messages)
		if err != nil {
			return fieldError(err)
		}
		addGen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		if text, err = s.render(conversation.Chat{Messages: msgs, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs}, addGen); err != nil {
			return err
		}
	default:
		return invalid("prompt", "give a prompt or messages")
	}
	ids := s.tok.Encode(text)
	resp := openai.TokenizeResponse{Count: len(ids), MaxModelLen: s.eng.Info().SequenceLength, Tokens: ids}
	if resp.Tokens == nil {
		resp.Tokens = []int32{}
	}
	if req.ReturnTokenStrs {
		for _, id := range ids {
			t, _ := s.tokenText(id)
			resp.TokenStrs = append(resp.TokenStrs, t)
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) error {
	var req openai.DetokenizeRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	if err := s.checkTokens("tokens", req.Tokens); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, openai.DetokenizeResponse{Prompt: s.tok.Decode(req.Tokens)})
	return nil
}

func (s *Server) checkTokens(param string, ids []int32) error {
	n := s.tok.VocabSize()
	for i, id := range ids {
		if id < 0 || int(id) >= n {
			return invalid(param, "%s[%d] = %d: not a token id (vocabulary size %d)", param, i, id, n)
		}
	}
	return nil
}
